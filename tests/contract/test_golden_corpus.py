"""Every message as it was released still decodes, on its own topic, with the same meaning (``golden.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas.codec import decode
from schemas.topics import MESSAGE_TYPES
from tests.contract.golden import GOLDEN, golden_path

FILES = sorted(GOLDEN.glob("*.json"))


def _same_meaning(released: Any, now: Any, where: str = "payload") -> list[str]:
    """Where the current reading of a released value differs from it: every field the release wrote must read
    back as it was (fields added since, with their defaults, may appear beside them)."""
    if isinstance(released, dict):
        if not isinstance(now, dict):
            return [f"{where}: was an object, reads as {now!r}"]
        return [d for k, v in released.items()
                for d in (_same_meaning(v, now[k], f"{where}.{k}") if k in now else [f"{where}.{k}: dropped"])]
    if isinstance(released, list):
        if not isinstance(now, list) or len(now) != len(released):
            return [f"{where}: was {released!r}, reads as {now!r}"]
        pairs = enumerate(zip(released, now, strict=True))
        return [d for i, (a, b) in pairs for d in _same_meaning(a, b, f"{where}[{i}]")]
    return [] if released == now else [f"{where}: was {released!r}, reads as {now!r}"]


def test_every_message_type_has_its_golden_file() -> None:
    missing = [t for t, cls in MESSAGE_TYPES.items() if not golden_path(cls).exists()]
    assert not missing, f"add the released shape of {missing}: python -m tests.contract.golden"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_released_message_decodes_with_the_same_meaning(path: Path) -> None:
    record = json.loads(path.read_text(encoding="utf-8"))
    raw = json.dumps(record["value"]).encode()
    envelope = decode(raw, topic=record["topic"])
    assert envelope.key() == record["key"]
    now = json.loads(envelope.payload.model_dump_json())
    assert _same_meaning(record["value"]["payload"], now) == []


def test_the_comparison_notices_a_changed_meaning() -> None:
    assert _same_meaning({"a": 1, "b": [1, {"c": "x"}]}, {"a": 1, "b": [1, {"c": "x"}], "new": 0}) == []
    assert _same_meaning({"a": 1, "b": 2}, {"a": 1}) == ["payload.b: dropped"]
    assert _same_meaning({"b": [{"c": "x"}]}, {"b": [{"c": "y"}]}) == ["payload.b[0].c: was 'x', reads as 'y'"]
