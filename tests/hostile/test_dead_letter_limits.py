"""A dead letter stays writable whatever the hostile record carried: the value, key and kept headers are
bounded, and a cut is recorded so the original size is known."""

from __future__ import annotations

from services.runtime.kafka.headers import (
    DLQ_ORIGINAL_BYTES,
    DLQ_REASON,
    MAX_DEAD_VALUE_BYTES,
    MAX_KEPT_HEADER_BYTES,
    dead_letter_headers,
    dead_letter_key,
    dead_letter_value,
    header_value,
)


def test_small_values_and_keys_are_kept_whole() -> None:
    assert dead_letter_value(b"{}") == (b"{}", [])
    assert dead_letter_value(None) == (None, [])
    assert dead_letter_key(b"job-1") == b"job-1"
    assert dead_letter_key(None) is None


def test_a_value_that_decompressed_beyond_the_limit_keeps_its_prefix_and_size() -> None:
    value = b"x" * (8 << 20)
    kept, extra = dead_letter_value(value)
    assert kept == value[:MAX_DEAD_VALUE_BYTES]
    assert header_value(extra, DLQ_ORIGINAL_BYTES) == str(8 << 20)


def test_huge_keys_and_header_floods_are_bounded() -> None:
    assert len(dead_letter_key(b"k" * (1 << 20)) or b"") == MAX_KEPT_HEADER_BYTES
    flood = [(f"h{i}", b"v" * 1000) for i in range(1000)] + [(DLQ_REASON, b"forged")]
    headers = dead_letter_headers(flood, reason="malformed", detail="d" * 10_000, topic="t", partition=0,
                                  offset=1, group="g", attempts=0)
    assert sum(len(k) + len(v) for k, v in headers) < MAX_KEPT_HEADER_BYTES + 4096
    assert header_value(headers, DLQ_REASON) == "malformed"  # a forged reason header is not carried over
    assert [v for k, v in headers if k == DLQ_REASON] == [b"malformed"]
