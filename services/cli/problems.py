"""How the CLI says what is wrong with a request: every invalid field of a refused spec, one per line, with the
field it most likely meant when a name is misspelt."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel

from muster.client import InvalidSpec, InvalidWorkload, MusterError, Unprocessable
from schemas.jobspec import JobSpec

UNKNOWN_FIELD = "Extra inputs are not permitted"


def problem_text(exc: MusterError) -> str:
    """The error as the CLI prints it: a refused spec lists each of its problems."""
    errors: list[dict[str, Any]] | None = None
    if isinstance(exc, InvalidSpec) and not isinstance(exc, InvalidWorkload):
        errors = exc.errors
        head = "invalid job spec"
    elif isinstance(exc, Unprocessable) and len(exc.errors) > 1:
        errors = exc.errors
        head = f"{exc.status} {exc.error}"
    if not errors:
        return str(exc)
    count = f"{len(errors)} problems" if len(errors) > 1 else "1 problem"
    lines = [f"{head} ({count}):"]
    for err in errors:
        field, detail = str(err.get("field") or "spec"), str(err.get("detail") or "invalid")
        lines.append(f"  {field}: {detail}{_did_you_mean(field, detail)}")
    return "\n".join(lines)


def _did_you_mean(field: str, detail: str) -> str:
    if detail != UNKNOWN_FIELD:
        return ""
    name = field.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(name, sorted(_spec_field_names()), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


@cache
def _spec_field_names() -> frozenset[str]:
    """Every field name of a job spec and of the models inside it, as written in YAML (aliases included)."""
    return frozenset(_names(JobSpec, set()))


def _names(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[str]:
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        yield info.alias or name
        for inner in _models_in(info.annotation):
            yield from _names(inner, seen)


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The models an annotation names, inside unions, lists and mappings too."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _models_in(arg)
