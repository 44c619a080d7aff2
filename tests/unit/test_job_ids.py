"""Job ids carry their tenant's tag: every id minted for a tenant says whose it is, keyed ids stay the same for
one key through any path, and ids made before ids carried tags are still told and made again."""

from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter

from schemas.envelope import JobId
from services.spec.ids import (
    MAX_JOB_ID,
    id_tenant_tag,
    job_id_of_tenant,
    keyed_job_id,
    kube_job_id,
    kube_workload_id,
    random_job_id,
    tag_sharers,
    tenant_tag,
    untagged_keyed_job_id,
    with_tenant_tag,
)
from tests.builders.tenants import COLLIDING

_JOB_ID = TypeAdapter(JobId)

MINTED = {
    "keyed": lambda name, tenant: keyed_job_id(name, tenant, "run-42"),
    "random": lambda name, tenant: random_job_id(name, tenant),
    "fresh, tagged": lambda name, tenant: with_tenant_tag(random_job_id(name), tenant),
    "kube Job": lambda name, tenant: kube_job_id("ns", name, "uid-1", tenant=tenant),
    "kube workload": lambda name, tenant: kube_workload_id("JobSet", "ns", name, "uid-1", tenant=tenant),
}


def test_a_tenant_tag_is_six_hex_digits_of_the_name() -> None:
    assert re.fullmatch(r"[0-9a-f]{6}", tenant_tag("team-a"))
    assert tenant_tag("team-a") == tenant_tag("team-a") != tenant_tag("team-b")
    assert tenant_tag(COLLIDING[0]) == tenant_tag(COLLIDING[1])


@pytest.mark.parametrize("how", sorted(MINTED))
@pytest.mark.parametrize("name", ["train", "x" * 80, "a.b.c", "9lives", "---", "My Job_2", "run-abc123"])
def test_every_id_minted_for_a_tenant_carries_its_tag(how: str, name: str) -> None:
    job_id = MINTED[how](name, "team-a")
    assert _JOB_ID.validate_python(job_id) == job_id and len(job_id) <= MAX_JOB_ID
    assert re.fullmatch(rf"[a-z0-9-]+-{tenant_tag('team-a')}-[0-9a-f]{{8}}", job_id), job_id
    assert id_tenant_tag(job_id) == tenant_tag("team-a")
    assert job_id_of_tenant(job_id, "team-a") and not job_id_of_tenant(job_id, "team-b")


def test_keyed_ids_are_the_same_for_one_tenant_and_key_and_never_another_tenants() -> None:
    assert keyed_job_id("train", "team-a", "k") == keyed_job_id("train", "team-a", "k")
    assert keyed_job_id("train", "team-a", "k") != keyed_job_id("train", "team-a", "k2")
    b = keyed_job_id("train", "team-b", "k")
    assert b != keyed_job_id("train", "team-a", "k") and not job_id_of_tenant(b, "team-a")
    assert random_job_id("train", "team-a") != random_job_id("train", "team-a")


@pytest.mark.parametrize(("job_id", "tag"), [
    ("train-abc123-0123abcd", "abc123"),
    ("a-b-c-abc123-0123abcd", "abc123"),
    ("train-0123abcd", None),  # made before ids carried tags
    ("abc123-0123abcd", None),  # no name part
    ("nightly-202613010200-00000000", None),  # a recurring job's firing
    ("train-abc12-0123abcd", None),
    ("train-abc1234-0123abcd", None),
    ("train-abc123-0123abcd0", None),
    ("train-ABC123-0123abcd", None),
    ("j1", None),
])
def test_the_tag_an_id_carries(job_id: str, tag: str | None) -> None:
    assert id_tenant_tag(job_id) == tag


def test_ids_made_before_tags_are_made_again_the_same() -> None:
    """The untagged forms are the ids of the previous release, byte for byte (values from it)."""
    assert untagged_keyed_job_id("train", "team-a", "run-42") == "train-26840ab7"
    assert untagged_keyed_job_id("x" * 60, "team-a", "k") == "x" * 39 + "-524d39b8"
    assert kube_job_id("team-a", "sweep", "uid-1", tenant=None) == "sweep-4e333ec1"
    assert kube_workload_id("JobSet", "team-a", "llm", "uid-2", tenant=None) == "llm-d729395c"
    for job_id in ("train-26840ab7", "sweep-4e333ec1", random_job_id("train")):
        assert id_tenant_tag(job_id) is None
    # the tagged id of the same key keeps the suffix: only the tag is new
    assert keyed_job_id("train", "team-a", "run-42") == f"train-{tenant_tag('team-a')}-26840ab7"


def test_tagging_a_fresh_id() -> None:
    tag = tenant_tag("team-a")
    assert with_tenant_tag("train-00000001", "team-a") == f"train-{tag}-00000001"
    assert with_tenant_tag(f"train-{tag}-00000001", "team-a") == f"train-{tag}-00000001"  # tagged already
    long = with_tenant_tag("y" * 39 + "-00000001", "team-a")
    assert len(long) == MAX_JOB_ID and long.endswith(f"-{tag}-00000001")
    assert with_tenant_tag("00000001", "team-a") == f"job-{tag}-00000001"


def test_tenants_whose_tags_are_the_same() -> None:
    a, b = COLLIDING
    assert tag_sharers(a, [a, b, "team-a"]) == [b]
    assert tag_sharers(b, {a}) == [a]
    assert tag_sharers("team-a", [a, b, "team-a", "team-b"]) == []
    assert keyed_job_id("train", a, "k") != keyed_job_id("train", b, "k")  # the suffix still tells them apart
    assert job_id_of_tenant(keyed_job_id("train", a, "k"), b)  # but the tag does not
