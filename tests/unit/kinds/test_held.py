"""Held back until admission: suspended, or the gate ``muster.dev/admission`` in every pod template; and
the reason given to the owner of an object that is not."""

from __future__ import annotations

from typing import Any

import pytest

from services.spec.kinds import kind_of
from tests.unit.kinds.builders import example, runtime

EXAMPLES = ["jobset.yaml", "trainjob.yaml", "rayjob.yaml", "raycluster.yaml", "leaderworkerset.yaml",
            "deployment.yaml", "notebook-statefulset.yaml", "pod-group.yaml"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_is_held_back(name: str) -> None:
    obj = example(name)
    kind = kind_of(obj)
    assert kind.held(obj, [runtime()])
    assert kind.why_not_held(obj, [runtime()]) is None


def _unsuspended(name: str) -> dict[str, Any]:
    obj = example(name)
    obj["spec"]["suspend"] = False
    return obj


def _ungated(name: str, *path: str | int) -> dict[str, Any]:
    obj = example(name)
    here: Any = obj
    for key in path:
        here = here[key]
    here.pop("schedulingGates")
    return obj


@pytest.mark.parametrize(("obj", "reason"), [
    (_unsuspended("jobset.yaml"),
     "JobSet team-a/llm-pretrain is not held back: create it with spec.suspend: true (or with the scheduling gate "
     "[{name: muster.dev/admission}] in every pod template); not gated: replicatedJob coordinator "
     "(spec.replicatedJobs[0].template.spec.template.spec.schedulingGates); replicatedJob workers "
     "(spec.replicatedJobs[1].template.spec.template.spec.schedulingGates)"),
    (_unsuspended("rayjob.yaml"),
     "RayJob team-a/batch-inference is not held back: create it with spec.suspend: true (or with the scheduling "
     "gate [{name: muster.dev/admission}] in every pod template); not gated: the head group "
     "(spec.rayClusterSpec.headGroupSpec.template.spec.schedulingGates); worker group gpu-workers "
     "(spec.rayClusterSpec.workerGroupSpecs[0].template.spec.schedulingGates); worker group cpu-workers "
     "(spec.rayClusterSpec.workerGroupSpecs[1].template.spec.schedulingGates); the submitter "
     "(spec.submitterPodTemplate.spec.schedulingGates)"),
    (_ungated("deployment.yaml", "spec", "template", "spec"),
     "Deployment team-a/embeddings cannot be suspended, so its pods must be created held back: give every pod "
     "template the scheduling gate [{name: muster.dev/admission}]; missing in the pod template "
     "(spec.template.spec.schedulingGates)"),
    (_ungated("leaderworkerset.yaml", "spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
     "LeaderWorkerSet team-a/llm-serve cannot be suspended, so its pods must be created held back: give every "
     "pod template the scheduling gate [{name: muster.dev/admission}]; missing in the leader template "
     "(spec.leaderWorkerTemplate.leaderTemplate.spec.schedulingGates)"),
    (_ungated("notebook-statefulset.yaml", "spec", "template", "spec"),
     "StatefulSet team-a/alice-notebook cannot be suspended, so its pods must be created held back: give every "
     "pod template the scheduling gate [{name: muster.dev/admission}]; missing in the pod template "
     "(spec.template.spec.schedulingGates)"),
    (_ungated("pod-group.yaml", "items", 1, "spec"),
     "pod group team-a/mpi-bench: pods cannot be suspended, so each must be created with the scheduling gate "
     "muster.dev/admission (spec.schedulingGates: [{name: muster.dev/admission}]); not gated: mpi-worker-0"),
])
def test_not_held_back_says_why(obj: dict[str, Any], reason: str) -> None:
    kind = kind_of(obj)
    assert not kind.held(obj, [runtime()])
    assert kind.why_not_held(obj, [runtime()]) == reason


def test_a_gated_suspend_kind_is_held_too() -> None:
    obj = _unsuspended("raycluster.yaml")
    for template in (obj["spec"]["headGroupSpec"]["template"], obj["spec"]["workerGroupSpecs"][0]["template"]):
        template["spec"]["schedulingGates"] = [{"name": "muster.dev/admission"}]
    assert kind_of(obj).held(obj)
    obj["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    assert not kind_of(obj).held(obj)


def test_a_trainjob_is_held_by_suspend_or_by_gates_in_its_overrides() -> None:
    obj = _unsuspended("trainjob.yaml")
    kind = kind_of(obj)
    assert kind.why_not_held(obj, [runtime()]) == (
        "TrainJob team-a/llama-finetune is not held back: create it with spec.suspend: true (or with a "
        "podSpecOverrides entry giving schedulingGates: [{name: muster.dev/admission}] to every job); not gated: node")
    assert kind.why_not_held(obj) == (
        "TrainJob team-a/llama-finetune is not suspended, and whether its jobs are gated cannot be told: TrainJob "
        "team-a/llama-finetune: its runtime ClusterTrainingRuntime torch-distributed was not found; create it (or fix "
        "spec.runtimeRef), then submit again")
    obj["spec"]["podSpecOverrides"][0]["schedulingGates"] = [{"name": "muster.dev/admission"}]
    assert kind.held(obj, [runtime()])
    assert kind.held(example("trainjob.yaml"))  # suspended: the runtime is not needed to tell


def test_a_lws_without_leader_template_needs_the_gate_in_the_worker_template_only() -> None:
    obj = example("leaderworkerset.yaml")
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert kind_of(obj).held(obj)
