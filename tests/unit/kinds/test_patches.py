"""Releasing, suspending and creating held back: the exact patches and manifests, and what applying them
does to the examples."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.spec.kinds import Patch, kind_of, ungate_pod_patch
from tests.unit.kinds.builders import ANNOTATIONS, GATE, LABELS, ROOT, applied, example, pod, runtime

META = {"labels": dict(LABELS), "annotations": dict(ANNOTATIONS)}


def _meta(role: str) -> dict[str, Any]:
    return {"labels": {**LABELS, "muster.dev/role": role}, "annotations": dict(ANNOTATIONS)}


def _template_ops(base: str, role: str) -> list[dict[str, Any]]:
    return [{"op": "add", "path": f"{base}/metadata", "value": _meta(role)},
            {"op": "add", "path": f"{base}/spec/schedulingGates", "value": [GATE]}]


def _release(name: str) -> tuple[Patch, ...] | None:
    obj = example(name)
    return kind_of(obj).release_patch(obj, LABELS, ANNOTATIONS, [runtime()])


def test_jobset_release_is_one_json_patch_testing_each_replicated_job() -> None:
    assert _release("jobset.yaml") == (Patch("json", [
        {"op": "test", "path": "/spec/replicatedJobs/0/name", "value": "coordinator"},
        *_template_ops("/spec/replicatedJobs/0/template/spec/template", "coordinator"),
        {"op": "test", "path": "/spec/replicatedJobs/1/name", "value": "workers"},
        *_template_ops("/spec/replicatedJobs/1/template/spec/template", "workers"),
        {"op": "add", "path": "/spec/suspend", "value": False},
    ]),)


def test_rayjob_release_writes_kuberays_default_submitter_template_gated() -> None:
    assert _release("rayjob.yaml") == (Patch("json", [
        *_template_ops("/spec/rayClusterSpec/headGroupSpec/template", "head"),
        {"op": "test", "path": "/spec/rayClusterSpec/workerGroupSpecs/0/groupName", "value": "gpu-workers"},
        *_template_ops("/spec/rayClusterSpec/workerGroupSpecs/0/template", "gpu-workers"),
        {"op": "test", "path": "/spec/rayClusterSpec/workerGroupSpecs/1/groupName", "value": "cpu-workers"},
        *_template_ops("/spec/rayClusterSpec/workerGroupSpecs/1/template", "cpu-workers"),
        {"op": "add", "path": "/spec/submitterPodTemplate", "value": {
            "metadata": _meta("submitter"),
            "spec": {"restartPolicy": "Never", "schedulingGates": [GATE], "containers": [
                {"name": "ray-job-submitter", "image": "rayproject/ray:2.46.0",
                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                               "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}},
        {"op": "add", "path": "/spec/suspend", "value": False},
    ]),)


def test_raycluster_release() -> None:
    assert _release("raycluster.yaml") == (Patch("json", [
        *_template_ops("/spec/headGroupSpec/template", "head"),
        {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "workers"},
        *_template_ops("/spec/workerGroupSpecs/0/template", "workers"),
        {"op": "add", "path": "/spec/suspend", "value": False},
    ]),)


def test_trainjob_release_gates_through_the_override_already_naming_the_job_then_unsuspends() -> None:
    assert _release("trainjob.yaml") == (
        Patch("merge", {"spec": {**META, "podSpecOverrides": [
            {"targetJobs": [{"name": "node"}], "nodeSelector": {"muster.dev/gpu-type": "a100"},
             "schedulingGates": [GATE]}]}}),
        Patch("merge", {"spec": {"suspend": False}}),
    )


def test_trainjob_release_adds_an_override_for_the_jobs_no_override_names() -> None:
    obj = example("trainjob.yaml")
    del obj["spec"]["podSpecOverrides"]
    rt = runtime()
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    jobs.insert(0, {"name": "dataset-initializer", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": "init"}]}}}}})
    assert kind_of(obj).release_patch(obj, LABELS, {}, [rt]) == (
        Patch("merge", {"spec": {"labels": LABELS, "podSpecOverrides": [
            {"targetJobs": [{"name": "dataset-initializer"}, {"name": "node"}], "schedulingGates": [GATE]}]}}),
        Patch("merge", {"spec": {"suspend": False}}),
    )


def test_batch_job_release_is_a_merge_patch() -> None:
    job = yaml.safe_load((ROOT / "examples" / "jobs" / "kube-job.yaml").read_text(encoding="utf-8"))
    assert kind_of(job).release_patch(job, LABELS, ANNOTATIONS) == (Patch("merge", {"spec": {
        "suspend": False, "template": {"metadata": _meta("main"), "spec": {"schedulingGates": [GATE]}}}}),)


@pytest.mark.parametrize("name", ["leaderworkerset.yaml", "deployment.yaml", "notebook-statefulset.yaml",
                                  "pod-group.yaml"])
def test_gate_kinds_have_nothing_to_release_or_suspend(name: str) -> None:
    obj = example(name)
    assert _release(name) is None
    assert kind_of(obj).suspend_patch(obj) is None


@pytest.mark.parametrize("name", ["jobset.yaml", "trainjob.yaml", "rayjob.yaml", "raycluster.yaml"])
def test_suspend_kinds_are_preempted_by_suspending(name: str) -> None:
    obj = example(name)
    patch = kind_of(obj).suspend_patch(obj)
    assert patch == Patch("merge", {"spec": {"suspend": True}})
    assert patch.content_type == "application/merge-patch+json"


@pytest.mark.parametrize("name", ["jobset.yaml", "trainjob.yaml", "rayjob.yaml", "raycluster.yaml"])
def test_released_objects_keep_the_gate_and_a_second_release_changes_nothing_more(name: str) -> None:
    obj = example(name)
    kind = kind_of(obj)
    released = applied(obj, kind.release_patch(obj, LABELS, ANNOTATIONS, [runtime()]) or ())
    assert released["spec"]["suspend"] is False
    assert kind.held(released, [runtime()])  # the gate in every template: the next run's pods are gated too
    again = applied(released, kind.release_patch(released, LABELS, ANNOTATIONS, [runtime()]) or ())
    assert again == released
    suspended = applied(released, [kind.suspend_patch(released)])  # type: ignore[list-item]
    assert suspended["spec"]["suspend"] is True and kind.held(suspended, [runtime()])
    # roles are unchanged by the release
    assert kind.roles(released, [runtime()]) == kind.roles(obj, [runtime()])


def test_a_release_adds_to_existing_labels_and_gates_without_replacing_them() -> None:
    obj = example("raycluster.yaml")
    head = obj["spec"]["headGroupSpec"]["template"]
    head["metadata"] = {"labels": {"app": "ray", "muster.dev/job-id": "old"}}
    head["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    (patch,) = kind_of(obj).release_patch(obj, LABELS, {}) or ()
    assert patch.body[:3] == [
        {"op": "add", "path": "/spec/headGroupSpec/template/metadata/labels/muster.dev~1attempt", "value": "0"},
        {"op": "add", "path": "/spec/headGroupSpec/template/metadata/labels/muster.dev~1job-id",
         "value": "job-7f3a9c2e"},
        {"op": "add", "path": "/spec/headGroupSpec/template/metadata/labels/muster.dev~1role", "value": "head"},
    ]
    assert patch.body[3] == {"op": "add", "path": "/spec/headGroupSpec/template/spec/schedulingGates/-", "value": GATE}
    released = applied(obj, [patch])
    assert released["spec"]["headGroupSpec"]["template"]["metadata"]["labels"] == {
        "app": "ray", **LABELS, "muster.dev/role": "head"}
    assert released["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] == [
        {"name": "example.com/quota"}, GATE]


def test_a_release_fails_on_an_object_whose_lists_moved() -> None:
    obj = example("jobset.yaml")
    (patch,) = kind_of(obj).release_patch(obj, LABELS, {}) or ()
    obj["spec"]["replicatedJobs"].reverse()
    with pytest.raises(Exception, match="test"):
        applied(obj, [patch])


# -- through Muster: the manifest created held back by the gates -------------------------------------------------

def _hold(name: str) -> dict[str, Any]:
    obj = example(name)
    for one in obj.get("items") or [obj]:  # a pod group is a List of pods
        one["metadata"]["uid"], one["metadata"]["resourceVersion"] = "u-1", "42"
        one["status"] = {"anything": True}
    return kind_of(obj).hold_manifest(obj, name="job-7f3a9c2e", namespace="team-b", labels=LABELS,
                                      annotations=ANNOTATIONS, related=[runtime()])


@pytest.mark.parametrize(("name", "templates"), [
    ("jobset.yaml", [("spec", "replicatedJobs", 0, "template", "spec", "template", "coordinator"),
                     ("spec", "replicatedJobs", 1, "template", "spec", "template", "workers")]),
    ("rayjob.yaml", [("spec", "rayClusterSpec", "headGroupSpec", "template", "head"),
                     ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "gpu-workers"),
                     ("spec", "rayClusterSpec", "workerGroupSpecs", 1, "template", "cpu-workers"),
                     ("spec", "submitterPodTemplate", "submitter")]),
    ("raycluster.yaml", [("spec", "headGroupSpec", "template", "head"),
                         ("spec", "workerGroupSpecs", 0, "template", "workers")]),
    ("leaderworkerset.yaml", [("spec", "leaderWorkerTemplate", "leaderTemplate", "leader"),
                              ("spec", "leaderWorkerTemplate", "workerTemplate", "worker")]),
    ("deployment.yaml", [("spec", "template", "main")]),
    ("notebook-statefulset.yaml", [("spec", "template", "main")]),
])
def test_hold_manifest_gates_and_labels_every_role_template(name: str, templates: list[tuple[Any, ...]]) -> None:
    held = _hold(name)
    meta = held["metadata"]
    assert (meta["name"], meta["namespace"], "uid" in meta, "resourceVersion" in meta, "status" in held) == (
        "job-7f3a9c2e", "team-b", False, False, False)
    assert meta["labels"] == {"muster.dev/queue": "team-a", **LABELS}
    assert ANNOTATIONS.items() <= meta["annotations"].items()
    kind = kind_of(held)
    if kind.suspendable:
        assert held["spec"]["suspend"] is False
    else:
        assert "suspend" not in held["spec"]
    for *path, role in templates:
        template: Any = held
        for key in path:
            template = template[key]
        assert [g for g in template["spec"]["schedulingGates"] if g == GATE] == [GATE]
        assert template["metadata"]["labels"].items() >= {**LABELS, "muster.dev/role": role}.items()
        assert template["metadata"]["annotations"] == ANNOTATIONS
    assert kind.held(held)
    assert kind.roles(held) == kind.roles(example(name), [runtime()])


def test_hold_manifest_keeps_the_templates_own_labels() -> None:
    held = _hold("deployment.yaml")
    assert held["spec"]["template"]["metadata"]["labels"] == {"app": "embeddings", **LABELS, "muster.dev/role": "main"}


def test_a_trainjob_is_created_gated_through_its_overrides_and_labelled_for_its_jobset() -> None:
    held = _hold("trainjob.yaml")
    assert held["spec"]["suspend"] is False
    assert held["spec"]["podSpecOverrides"] == [{"targetJobs": [{"name": "node"}],
                                                 "nodeSelector": {"muster.dev/gpu-type": "a100"},
                                                 "schedulingGates": [GATE]}]
    assert (held["spec"]["labels"], held["spec"]["annotations"]) == (LABELS, ANNOTATIONS)
    assert kind_of(held).held(held, [runtime()])


def test_a_pod_group_is_created_as_gated_pods_of_one_group() -> None:
    held = _hold("pod-group.yaml")
    assert [p["metadata"]["name"] for p in held["items"]] == [
        "job-7f3a9c2e-mpi-launcher", "job-7f3a9c2e-mpi-worker-0", "job-7f3a9c2e-mpi-worker-1"]
    for p, role in zip(held["items"], ["launcher", "worker", "worker"], strict=True):
        assert (p["metadata"]["namespace"], "uid" in p["metadata"], "status" in p) == ("team-b", False, False)
        assert p["metadata"]["labels"] == {"muster.dev/queue": "team-a", "muster.dev/pod-group": "job-7f3a9c2e",
                                           **LABELS, "muster.dev/role": role}
        assert p["metadata"]["annotations"] == {"muster.dev/pod-group-size": "3", **ANNOTATIONS}
        assert p["spec"]["schedulingGates"] == [GATE]
    kind = kind_of(held)
    assert kind.held(held)
    assert [r.name for r in kind.roles(held).roles] == ["launcher", "worker"]


@pytest.mark.parametrize("name", ["deployment.yaml", "notebook-statefulset.yaml"])
def test_built_in_manifests_are_valid_kubernetes(name: str) -> None:
    kubernetes_validate.validate(_hold(name), "1.30", strict=True)
    kubernetes_validate.validate(example(name), "1.30", strict=True)


def test_pod_group_manifests_are_valid_kubernetes() -> None:
    for p in [*_hold("pod-group.yaml")["items"], *example("pod-group.yaml")["items"]]:
        kubernetes_validate.validate(p, "1.30", strict=True)


# -- one gated pod onto its node -----------------------------------------------------------------------------------

def test_ungating_one_pod() -> None:
    p = pod("llm-pretrain-workers-0-1-x7k2p", {"jobset.sigs.k8s.io/jobset-name": "llm-pretrain"},
            spec={"nodeSelector": {"muster.dev/gpu-type": "a100"},
                  "schedulingGates": [{"name": "example.com/other"}, GATE],
                  "containers": [{"name": "trainer", "image": "img"}]})
    patch = ungate_pod_patch(p, "east-a100-3", {**LABELS, "muster.dev/role": "workers"})
    assert patch == Patch("json", [
        {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": "east-a100-3"},
        {"op": "add", "path": "/metadata/labels/muster.dev~1attempt", "value": "0"},
        {"op": "add", "path": "/metadata/labels/muster.dev~1job-id", "value": "job-7f3a9c2e"},
        {"op": "add", "path": "/metadata/labels/muster.dev~1role", "value": "workers"},
        {"op": "test", "path": "/spec/schedulingGates/1", "value": GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ])
    released = applied(p, [patch])
    assert released["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert released["spec"]["nodeSelector"] == {"muster.dev/gpu-type": "a100", "kubernetes.io/hostname": "east-a100-3"}


def test_ungating_refuses_a_pod_that_is_not_gated_or_bound_elsewhere() -> None:
    with pytest.raises(ValueError, match="not gated"):
        ungate_pod_patch(pod("p", {}, gated=False), "n1", {})
    elsewhere = pod("p", {}, spec={"nodeSelector": {"kubernetes.io/hostname": "n2"},
                                   "containers": [{"name": "c", "image": "i"}]})
    with pytest.raises(ValueError, match="already selects node n2, not n1"):
        ungate_pod_patch(elsewhere, "n1", {})
    same = ungate_pod_patch(elsewhere, "n2", {})
    assert [op["op"] for op in same.body] == ["test", "remove"]  # type: ignore[union-attr]
