"""Deterministic Kubernetes names and label values derived from Muster ids."""

from __future__ import annotations

import hashlib
import re

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
MAX_LABEL = 63
#: An Indexed Job's pods are named and host-named ``<job>-<index>``; keep room for ``-4095``.
MAX_JOB_NAME = MAX_LABEL - 5
_HASH_LEN = 8


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_LEN]


def dns1123_label(text: str, max_length: int = MAX_LABEL) -> str:
    """``text`` as a DNS-1123 label of at most ``max_length`` characters.

    A valid, short enough ``text`` is kept as is; anything else is lower-cased, stripped of
    invalid characters, cut, and given a hash of the original so distinct ids stay distinct.
    """
    if len(text) <= max_length and DNS1123_LABEL.match(text):
        return text
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-")
    room = max_length - _HASH_LEN - 1
    cleaned = cleaned[:room].rstrip("-")
    return f"{cleaned}-{_digest(text)}" if cleaned else f"x{_digest(text)}"


def label_value(text: str) -> str:
    """``text`` as a valid label value (kept as is when it already is one)."""
    if len(text) <= MAX_LABEL and LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    cleaned = cleaned[: MAX_LABEL - _HASH_LEN - 1].strip("-_.")
    return f"{cleaned}-{_digest(text)}" if cleaned else _digest(text)


def job_object_name(job_id: str, attempt: int) -> str:
    """The batch/v1 Job of one attempt: ``<job-id>-a<attempt>``, a DNS-1123 label of at most 58 characters."""
    if attempt < 0:
        raise ValueError("attempt must not be negative")
    suffix = f"-a{attempt}"
    return dns1123_label(job_id, MAX_JOB_NAME - len(suffix)) + suffix
