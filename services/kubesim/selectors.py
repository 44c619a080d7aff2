"""Label and field selectors in the string form of the Kubernetes API (``a=b,c in (x,y),!d``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from services.kubesim.errors import ApiError

_SET_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One selector term: ``key op values``; ``op`` is one of = != in notin exists !exists."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in (t.strip() for t in terms) if t]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a label selector; raises a 400 ``ApiError`` on syntax errors."""
    if not text:
        return []
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        if m := _SET_RE.match(term):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ_RE.match(term):
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append(Requirement(m.group(1), op, (m.group(3),)))
        elif m := _EXISTS_RE.match(term):
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise ApiError(400, f"unable to parse requirement: {term!r}", "BadRequest")
    return reqs


def labels_match(reqs: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in reqs)


def selector_from_match(selector: Mapping[str, Any] | None) -> list[Requirement]:
    """Requirements of a structured ``LabelSelector`` (``matchLabels`` + ``matchExpressions``)."""
    if not selector:
        return []
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(str(expr.get("operator")))
        if op is None:
            raise ApiError(400, f"unsupported selector operator {expr.get('operator')!r}", "BadRequest")
        reqs.append(Requirement(str(expr.get("key")), op, tuple(str(v) for v in expr.get("values") or ())))
    return reqs


FIELD_GETTERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": lambda o: str(o.get("metadata", {}).get("name", "")),
    "metadata.namespace": lambda o: str(o.get("metadata", {}).get("namespace", "")),
    "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
    "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
    "involvedObject.name": lambda o: str((o.get("involvedObject") or {}).get("name") or ""),
    "involvedObject.kind": lambda o: str((o.get("involvedObject") or {}).get("kind") or ""),
    "involvedObject.namespace": lambda o: str((o.get("involvedObject") or {}).get("namespace") or ""),
    "involvedObject.uid": lambda o: str((o.get("involvedObject") or {}).get("uid") or ""),
    "reason": lambda o: str(o.get("reason") or ""),
    "type": lambda o: str(o.get("type") or ""),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (FIELD_GETTERS[self.field](obj) == self.value) == self.equal


def parse_field_selector(text: str | None) -> list[FieldRequirement]:
    """Parse a field selector over the fields kubesim indexes; unknown fields give 400 like the API."""
    if not text:
        return []
    reqs: list[FieldRequirement] = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise ApiError(400, f"invalid field selector: {term!r}", "BadRequest")
        name = m.group(1)
        if name not in FIELD_GETTERS:
            raise ApiError(400, f'field label not supported: "{name}"', "BadRequest")
        reqs.append(FieldRequirement(name, m.group(2) != "!=", m.group(3)))
    return reqs


def fields_match(reqs: list[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    return all(r.matches(obj) for r in reqs)
