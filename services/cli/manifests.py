"""The configuration files of ``muster apply -f``: YAML documents, each one configuration item tagged with its
``kind``, read and validated with the API's own models before anything is sent.

    kind: Queue              # Queue, Cohort, PriorityClass, Tenant, GpuType or Pool
    name: team-c
    cohort: research
    quotas: {gpu:a100: {nominal: 16}}

The other keys are the item's fields, as ``PUT /v1/config/<kind>s/<name>`` takes them (``schemas.config``).
An optional ``apiVersion: muster.dev/v1`` is accepted. Pure: no I/O besides the text handed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from muster.client import ConfigDocument, ConfigItem, ConfigKind
from schemas.config import (
    CohortConfig,
    GpuTypeConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    TenantConfig,
)

API_VERSION = "muster.dev/v1"

#: the ``kind`` of a document -> the API's kind and model
KINDS: dict[str, tuple[ConfigKind, type[BaseModel]]] = {
    "Cohort": ("cohort", CohortConfig),
    "PriorityClass": ("priority-class", PriorityClassConfig),
    "GpuType": ("gpu-type", GpuTypeConfig),
    "Pool": ("pool", PoolConfig),
    "Tenant": ("tenant", TenantConfig),
    "Queue": ("queue", QueueConfig),
}
#: the order items are sent in: the referenced before those that refer to them (cohorts and tenants before queues)
ORDER: tuple[ConfigKind, ...] = ("cohort", "priority-class", "gpu-type", "pool", "tenant", "queue")


class ManifestError(ValueError):
    """Why a configuration file cannot be applied: every problem found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Manifest:
    """One validated item of a file: where it came from (document number, 1-based), its kind and value."""

    document: int
    kind: ConfigKind
    item: ConfigItem

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.item.name}"


def _document_items(index: int, doc: Any) -> tuple[Manifest | None, list[str]]:
    where = f"document {index}"
    if not isinstance(doc, Mapping):
        return None, [f"{where}: a configuration item is a mapping with a `kind`, not {type(doc).__name__}"]
    body = dict(doc)
    kind_name = body.pop("kind", None)
    version = body.pop("apiVersion", API_VERSION)
    if version != API_VERSION:
        return None, [f"{where}: apiVersion {version!r} is not {API_VERSION!r}"]
    if kind_name not in KINDS:
        return None, [f"{where}: kind {kind_name!r} is not one of {', '.join(KINDS)}"]
    kind, model = KINDS[kind_name]
    name = body.get("name")
    if isinstance(name, str):
        where = f"{where} ({kind}/{name})"
    try:
        item = model.model_validate(body)
    except ValidationError as exc:
        return None, [f"{where}: {'.'.join(str(p) for p in err['loc']) or kind}: {err['msg']}" for err in exc.errors()]
    assert isinstance(item, QueueConfig | CohortConfig | PriorityClassConfig | GpuTypeConfig | PoolConfig
                      | TenantConfig)
    return Manifest(index, kind, item), []


def parse_manifests(text: str) -> list[Manifest]:
    """Every item of ``text`` (YAML documents separated by ``---``), validated, in the order to send them:
    by kind (``ORDER``), and cohorts with their parent first. Raises ``ManifestError`` listing every problem
    (invalid YAML, an unknown kind, a field the API would refuse, the same item twice)."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError([f"not valid YAML: {exc}"]) from None
    if not documents:
        raise ManifestError(["no configuration items (YAML documents with a `kind`)"])
    items: list[Manifest] = []
    problems: list[str] = []
    for index, doc in enumerate(documents, start=1):
        item, found = _document_items(index, doc)
        problems += found
        if item is not None:
            items.append(item)
    seen: dict[str, int] = {}
    for m in items:
        if m.ref in seen:
            problems.append(f"document {m.document}: {m.ref} is also defined by document {seen[m.ref]}")
        seen.setdefault(m.ref, m.document)
    if problems:
        raise ManifestError(problems)
    return _ordered(items)


def _ordered(items: list[Manifest]) -> list[Manifest]:
    by_kind = sorted(items, key=lambda m: (ORDER.index(m.kind), m.document))
    cohorts = [m for m in by_kind if m.kind == "cohort"]
    names = {m.item.name for m in cohorts}
    placed: list[Manifest] = []
    done: set[str] = set()

    def place(m: Manifest, trail: frozenset[str]) -> None:
        if m.item.name in done or m.item.name in trail:
            return  # a cycle: the gateway refuses it with its own reason
        parent = m.item.parent if isinstance(m.item, CohortConfig) else None
        if parent in names and parent not in done:
            place(next(c for c in cohorts if c.item.name == parent), trail | {m.item.name})
        placed.append(m)
        done.add(m.item.name)

    for cohort in cohorts:
        place(cohort, frozenset())
    return placed + [m for m in by_kind if m.kind != "cohort"]


def refers_to(m: Manifest) -> set[str]:
    """The ``kind/name`` of the items ``m`` names, which the gateway checks exist (a queue's cohort, a cohort's
    parent)."""
    item = m.item
    if isinstance(item, QueueConfig) and item.cohort is not None:
        return {f"cohort/{item.cohort}"}
    if isinstance(item, CohortConfig) and item.parent is not None:
        return {f"cohort/{item.parent}"}
    return set()


def current_items(document: ConfigDocument) -> dict[str, ConfigItem]:
    """The gateway's configuration by ``kind/name``."""
    groups: Iterable[tuple[ConfigKind, Iterable[ConfigItem]]] = (
        ("queue", document.queues), ("cohort", document.cohorts), ("priority-class", document.priority_classes),
        ("gpu-type", document.gpu_types), ("pool", document.pools), ("tenant", document.tenants),
    )
    return {f"{kind}/{item.name}": item for kind, items in groups for item in items}


def changed_fields(old: BaseModel, new: BaseModel) -> list[str]:
    """``field: old -> new`` for every field that differs (the whole value of a nested one)."""
    before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
    return [f"{key}: {_short(before.get(key))} -> {_short(after.get(key))}"
            for key in after if before.get(key) != after.get(key)]


def _short(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def plan(items: list[Manifest], current: Mapping[str, ConfigItem]) -> list[tuple[Manifest, str, list[str]]]:
    """What applying ``items`` onto ``current`` would do to each: ``created``, ``configured`` (with the changed
    fields) or ``unchanged``."""
    out: list[tuple[Manifest, str, list[str]]] = []
    for m in items:
        old = current.get(m.ref)
        if old is None:
            out.append((m, "created", []))
        elif old == m.item:
            out.append((m, "unchanged", []))
        else:
            out.append((m, "configured", changed_fields(old, m.item)))
    return out
