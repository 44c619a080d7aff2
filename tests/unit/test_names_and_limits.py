"""One spelling of a GPU type's quota resource and of the wire's text limits, used by every service: the
wire's helpers (``schemas.config``, ``schemas.envelope``) and the core's own (which imports only the standard
library) agree, and a clipped text always fits the field it goes into."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from schemas import config as wire
from schemas.envelope import MAX_REASON, MAX_TEXT, Reason, Text, clip_reason, clip_text
from services.core import model as core


@pytest.mark.parametrize("gpu_type", ["a100", "h100-80gb", "l4", "a100.mig-1g"])
def test_the_wire_and_the_core_name_a_gpu_types_resource_alike(gpu_type: str) -> None:
    name = wire.gpu_resource(gpu_type)
    assert name == core.gpu_resource(gpu_type) == f"gpu:{gpu_type}"
    assert wire.is_gpu_resource(name) and core.is_gpu_resource(name)
    assert wire.gpu_type_of(name) == gpu_type
    TypeAdapter(wire.ResourceName).validate_python(name)  # a name the quota schema accepts


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_cpu_and_memory_are_not_gpu_resources(resource: str) -> None:
    assert not wire.is_gpu_resource(resource) and not core.is_gpu_resource(resource)
    assert wire.gpu_type_of(resource) is None


def test_clipped_reasons_and_texts_fit_their_fields() -> None:
    TypeAdapter(Reason).validate_python(clip_reason("x" * (MAX_REASON + 10)))
    TypeAdapter(Text).validate_python(clip_text("y" * (MAX_TEXT * 2)))
    assert clip_reason("short") == "short" and len(clip_text("z" * 5000)) == MAX_TEXT
