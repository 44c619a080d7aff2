"""The client submits a Kubernetes object of a workload kind through Muster: wrapped into a spec whose roles
are read from it, its queue the given one or its label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.client import AsyncClient, InvalidSpec, InvalidWorkload, SubmitAccepted, workload_spec
from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from tests.gateway.builders import Harness

KUBE = Path(__file__).resolve().parents[2] / "examples" / "kube"


def example(file: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((KUBE / file).read_text(encoding="utf-8"))
    return obj


async def test_submit_workload_sends_the_jobset_with_its_roles(alice: AsyncClient, gw: Harness) -> None:
    accepted = await alice.submit_workload(example("jobset.yaml"), idempotency_key="pretrain-1")
    again = await alice.submit_workload(example("jobset.yaml"), idempotency_key="pretrain-1")
    assert isinstance(accepted, SubmitAccepted) and isinstance(again, SubmitAccepted) and again.duplicate
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    assert (sent.spec.name, sent.spec.queue, sent.spec.runtime_estimate_s) == ("llm-pretrain", "team-a", 6 * 3600)
    assert [(r.name, r.replicas, r.template.resources.gpus) for r in sent.spec.roles] == [
        ("coordinator", 1, 0), ("workers", 4, 4)]
    assert sent.spec.workload is not None and sent.spec.workload.manifest is not None


async def test_a_bare_object_given_to_submit_is_wrapped_too(alice: AsyncClient, gw: Harness) -> None:
    await alice.submit(example("leaderworkerset.yaml"))
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and [r.name for r in sent.spec.roles] == ["leader", "worker"]


async def test_the_given_queue_wins_and_a_trainjob_brings_its_runtime(alice: AsyncClient, gw: Harness) -> None:
    await alice.submit_workload(example("trainjob.yaml"), queue="team-a-ops",
                                related=[example("torch-distributed-runtime.yaml")])
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec.queue == "team-a-ops"
    assert [(r.name, r.replicas, r.template.resources.gpus) for r in sent.spec.roles] == [("node", 2, 8)]


async def test_objects_that_cannot_be_jobs_are_refused_before_sending(alice: AsyncClient, gw: Harness) -> None:
    with pytest.raises(InvalidWorkload, match="runtime ClusterTrainingRuntime torch-distributed was not found"):
        await alice.submit_workload(example("trainjob.yaml"))
    unlabelled = example("jobset.yaml")
    del unlabelled["metadata"]["labels"]
    with pytest.raises(InvalidSpec, match="names no queue"):
        await alice.submit(unlabelled)
    with pytest.raises(InvalidWorkload, match="Muster does not queue v1 ConfigMap"):
        workload_spec({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}})
    assert gw.publisher.sent == []
