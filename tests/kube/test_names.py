"""Deterministic DNS-1123 names and label values."""

from __future__ import annotations

import pytest

from services.runtime.kube import dns1123_label, job_object_name, label_value
from services.runtime.kube.names import DNS1123_LABEL, LABEL_VALUE


@pytest.mark.parametrize(
    ("job_id", "attempt", "expected"),
    [("train-1", 0, "train-1-a0"), ("a", 12, "a-a12"), ("0abc", 1, "0abc-a1")],
)
def test_valid_ids_are_kept(job_id: str, attempt: int, expected: str) -> None:
    assert job_object_name(job_id, attempt) == expected


@pytest.mark.parametrize("job_id", ["Train_1", "-x-", "a" * 100, "ÄÖÜ", "", "team/a:b.c", "x" * 58])
def test_other_ids_become_valid_bounded_names(job_id: str) -> None:
    for attempt in (0, 7, 12345):
        name = job_object_name(job_id, attempt)
        assert DNS1123_LABEL.match(name), name
        assert len(name) <= 58
        assert name.endswith(f"-a{attempt}")
        assert job_object_name(job_id, attempt) == name


def test_distinct_ids_stay_distinct() -> None:
    ids = ["Train_1", "train_1", "train-1_", "a" * 100, "a" * 101]
    assert len({dns1123_label(i) for i in ids}) == len(ids)


@pytest.mark.parametrize("text", ["ok", "Team_A.b", "x" * 63, "x" * 64, "-bad-", "a b/c", "", "_"])
def test_label_values(text: str) -> None:
    value = label_value(text)
    assert LABEL_VALUE.match(value) and len(value) <= 63
    if LABEL_VALUE.match(text) and len(text) <= 63:
        assert value == text
