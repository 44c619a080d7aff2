"""Dispatch plans: names, the rendered Job of an admission, source-Job patches, clones, the restart backoff."""

from __future__ import annotations

import json

import kubernetes_validate

from schemas.jobspec import CheckpointSpec
from services.dispatcher.binder import binding, binding_target
from services.dispatcher.plans import (
    DispatchSettings,
    admission_manifest,
    clone_manifest,
    object_name,
    restart_delay,
    source_job,
    source_job_patch,
)
from tests.builders.jobspecs import job_spec
from tests.dispatcher.builders import DURATION, TRAINING, admitted, placement, runs_for

SETTINGS = DispatchSettings()
K8S_VERSION = "1.30"


def env_of(manifest: dict) -> dict[str, str]:  # type: ignore[type-arg]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def pinned_nodes(manifest: dict) -> list[str]:  # type: ignore[type-arg]
    affinity = manifest["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    term = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    return list(term["matchExpressions"][0]["values"])


def test_names_are_deterministic_per_attempt_and_revision() -> None:
    assert object_name("train-7", 2) == "train-7-a2"
    assert object_name("train-7", 2, 3) == "train-7-a2-r3"
    long_id = "x" * 48
    assert len(object_name(long_id, 12, 100)) <= 58
    assert object_name(long_id, 12, 100) != object_name(long_id, 12, 101)


def test_admission_manifest() -> None:
    decision = admitted("train-7", 1, plan=placement("east-a100-2", "east-a100-3", pods_per_node=2))
    manifest = admission_manifest(decision, "evt-1", "corr-1", SETTINGS)
    meta = manifest["metadata"]
    assert (meta["name"], meta["namespace"]) == ("train-7-a1", "team-a")
    assert manifest["spec"]["completions"] == manifest["spec"]["parallelism"] == 4
    assert manifest["spec"]["backoffLimit"] == 0
    assert pinned_nodes(manifest) == ["east-a100-2", "east-a100-3"]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    env = env_of(manifest)
    assert env["MUSTER_JOB_ID"] == "train-7" and env["MUSTER_ATTEMPT"] == "1"
    assert env["MUSTER_CHECKPOINT_DIR"] == "/ckpt" and env["EPOCHS"] == "3"
    pod_annotations = manifest["spec"]["template"]["metadata"]["annotations"]
    assert pod_annotations[DURATION] == "30.0"
    assert json.loads(meta["annotations"]["muster.dev/placement"]) == ["east-a100-2"] * 2 + ["east-a100-3"] * 2
    assert meta["annotations"]["muster.dev/decision-event"] == "evt-1"
    assert meta["annotations"]["muster.dev/max-restarts"] == "3"
    assert meta["annotations"]["muster.dev/revision"] == "0"
    assert meta["labels"]["muster.dev/job-id"] == "train-7" and meta["labels"]["team"] == "nlp"


def test_default_checkpoint_directory() -> None:
    own = {**TRAINING, "checkpoint": CheckpointSpec(enabled=True, grace_period_s=30)}  # no directory of its own
    decision = admitted("train-8", job_spec=job_spec(**own, annotations=runs_for(30.0)))
    manifest = admission_manifest(decision, "e", "c", DispatchSettings(checkpoint_root="/data/ckpt/"))
    assert env_of(manifest)["MUSTER_CHECKPOINT_DIR"] == "/data/ckpt/train-8"


def test_source_job_reference() -> None:
    ours = admitted("a", job_spec=job_spec(**TRAINING, annotations={"muster.dev/source-job": "team-b/my-job",
                                                                    **runs_for(30.0)}))
    assert source_job(ours) == ("team-b", "my-job")
    bare = admitted("b", job_spec=job_spec(**TRAINING, annotations={"muster.dev/source-job": "my-job",
                                                                    **runs_for(30.0)}))
    assert source_job(bare) == ("team-a", "my-job")
    assert source_job(admitted("c")) is None


def test_source_job_patch_pins_and_unsuspends() -> None:
    decision = admitted("kube-1", 0, plan=placement("east-t4-0", pods_per_node=2))
    body = source_job_patch(decision, "evt", "corr")
    assert body["spec"]["suspend"] is False
    assert pinned_nodes(body) == ["east-t4-0"]
    assert body["spec"]["template"]["metadata"]["labels"]["muster.dev/attempt"] == "0"
    assert body["metadata"]["annotations"]["muster.dev/gang-size"] == "2"
    assert body["metadata"]["annotations"]["muster.dev/decision-event"] == "evt"


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_source_job_patch_adds_the_gpu_toleration_and_keeps_the_users() -> None:
    decision = admitted("kube-2", 0, plan=placement("east-t4-0", pods_per_node=2))
    theirs = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    body = source_job_patch(decision, "evt", "corr", [theirs])
    assert body["spec"]["template"]["spec"]["tolerations"] == [theirs, GPU_TOLERATION]


def test_source_job_patch_leaves_an_existing_gpu_toleration_alone() -> None:
    decision = admitted("kube-3", 0, plan=placement("east-t4-0", pods_per_node=2))
    body = source_job_patch(decision, "evt", "corr", [GPU_TOLERATION])
    assert "tolerations" not in body["spec"]["template"]["spec"]


def served(manifest: dict) -> dict:  # type: ignore[type-arg]
    """``manifest`` as the API server returns it after the Job controller saw it."""
    job: dict = json.loads(json.dumps(manifest))  # type: ignore[type-arg]
    job["metadata"].update({"uid": "u-1", "resourceVersion": "7", "creationTimestamp": "2026-11-01T12:00:00Z"})
    job["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "u-1"
    job["metadata"]["annotations"].update({"muster.dev/restart-at": "2026-11-01T12:00:10+00:00",
                                           "muster.dev/deleted-by": "muster"})
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    job["spec"]["template"]["metadata"]["labels"].update({"controller-uid": "u-1", "job-name": job["metadata"]["name"]})
    job["status"] = {"failed": 1}
    return job


def test_clone_for_a_restart_keeps_the_pods_and_drops_server_state() -> None:
    original = served(admission_manifest(admitted("train-9"), "evt-1", "c", SETTINGS))
    clone = clone_manifest(original, name="train-9-a0-r1", revision=1, restarts=1, decision_event="evt-1")
    assert clone["metadata"]["name"] == "train-9-a0-r1"
    assert "uid" not in clone["metadata"] and "status" not in clone and "selector" not in clone["spec"]
    assert "batch.kubernetes.io/controller-uid" not in clone["metadata"]["labels"]
    assert "controller-uid" not in clone["spec"]["template"]["metadata"]["labels"]
    annotations = clone["metadata"]["annotations"]
    assert "muster.dev/restart-at" not in annotations and "muster.dev/deleted-by" not in annotations
    assert (annotations["muster.dev/revision"], annotations["muster.dev/restarts"]) == ("1", "1")
    assert clone["spec"]["template"]["spec"] == original["spec"]["template"]["spec"]


def test_clone_for_a_rescale_repins() -> None:
    original = served(admission_manifest(admitted("train-10"), "evt-1", "c", SETTINGS))
    bigger = placement("east-a100-0", "east-a100-1", "east-a100-2")
    clone = clone_manifest(original, name="train-10-a0-r1", revision=1, restarts=0, decision_event="evt-2",
                           placement=bigger)
    assert clone["spec"]["completions"] == clone["spec"]["parallelism"] == 3
    assert pinned_nodes(clone) == ["east-a100-0", "east-a100-1", "east-a100-2"]
    assert clone["metadata"]["annotations"]["muster.dev/gang-size"] == "3"
    assert clone["metadata"]["annotations"]["muster.dev/decision-event"] == "evt-2"


def test_restart_backoff_doubles_up_to_the_cap() -> None:
    settings = DispatchSettings(restart_backoff_s=2.0, restart_backoff_max_s=10.0)
    assert [restart_delay(n, settings) for n in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]


def test_manifests_are_valid_kubernetes_objects() -> None:
    admission = admission_manifest(admitted("train-11"), "evt-1", "c", SETTINGS)
    kubernetes_validate.validate(admission, K8S_VERSION, strict=True)
    clone = clone_manifest(served(admission), name="train-11-a0-r1", revision=1, restarts=1, decision_event="e",
                           placement=placement("east-a100-3"))
    kubernetes_validate.validate(clone, K8S_VERSION, strict=True)
    kubernetes_validate.validate(binding("train-11-a0-0-abcde", "east-a100-3"), K8S_VERSION, strict=True)


def test_binding_target_follows_the_completion_index() -> None:
    manifest = admission_manifest(admitted("train-12", plan=placement("east-a100-1", "east-a100-2")), "e", "c",
                                  SETTINGS)
    template = manifest["spec"]["template"]
    assert template["spec"]["schedulerName"] == "muster"

    def pod(index: int, **spec: str) -> dict:  # type: ignore[type-arg]
        annotations = {**template["metadata"]["annotations"], "batch.kubernetes.io/job-completion-index": str(index)}
        return {"metadata": {"name": f"p{index}", "annotations": annotations},
                "spec": {**template["spec"], **spec}, "status": {"phase": "Pending"}}

    assert [binding_target(pod(i)) for i in (0, 1, 2)] == ["east-a100-1", "east-a100-2", None]
    assert binding_target(pod(0, nodeName="east-a100-1")) is None
    assert binding_target(pod(0, schedulerName="default-scheduler")) is None
    unpinned = admission_manifest(admitted("train-13"), "e", "c", DispatchSettings(bind_pods=False))
    assert "schedulerName" not in unpinned["spec"]["template"]["spec"]


def test_binding_target_of_a_pod_muster_created_onto_a_node_is_its_hostname_selector() -> None:
    def pod(**spec: object) -> dict:  # type: ignore[type-arg]
        return {"metadata": {"name": "p"}, "status": {"phase": "Pending"},
                "spec": {"schedulerName": "muster", "nodeSelector": {"kubernetes.io/hostname": "east-a100-4"}, **spec}}

    assert binding_target(pod()) == "east-a100-4"
    assert binding_target(pod(schedulingGates=[{"name": "muster.dev/admission"}])) is None  # not released yet
    assert binding_target(pod(nodeSelector={})) is None  # no node chosen
    assert binding_target(pod(schedulerName="default-scheduler")) is None
    assert binding_target(pod(nodeName="east-a100-4")) is None  # bound already
