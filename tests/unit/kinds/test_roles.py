"""Each kind's roles: names, pods, GPUs per pod, the role -> pod-set map, read from the examples and from
variations of them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from schemas.jobspec import JobSpec
from services.spec.kinds import KINDS, kind_for, kind_of, role_name
from tests.unit.kinds.builders import ROOT, example, runtime

Roles = list[tuple[str, int, int, str | None]]  # name, pods, GPUs per pod, GPU type


def _roles(obj: dict[str, Any]) -> Roles:
    plan = kind_of(obj).roles(obj, [runtime()])
    return [(r.name, r.replicas, r.template.resources.gpus, r.template.resources.gpu_type) for r in plan.roles]


@pytest.mark.parametrize(("name", "kind", "roles"), [
    ("jobset.yaml", "JobSet", [("coordinator", 1, 0, None), ("workers", 4, 4, "a100")]),
    ("trainjob.yaml", "TrainJob", [("node", 2, 8, "a100")]),
    ("rayjob.yaml", "RayJob", [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None),
                               ("submitter", 1, 0, None)]),
    ("raycluster.yaml", "RayCluster", [("head", 1, 0, None), ("workers", 2, 1, "a100")]),
    ("leaderworkerset.yaml", "LeaderWorkerSet", [("leader", 2, 4, "a100"), ("worker", 2, 4, "a100")]),
    ("deployment.yaml", "Deployment", [("main", 2, 1, "a100")]),
    ("notebook-statefulset.yaml", "StatefulSet", [("main", 1, 1, "a100")]),
    ("pod-group.yaml", "Pod", [("launcher", 1, 0, None), ("worker", 2, 4, "a100")]),
])
def test_the_examples_roles(name: str, kind: str, roles: Roles) -> None:
    obj = example(name)
    assert kind_of(obj).identity.kind == kind
    assert _roles(obj) == roles


def test_the_roles_make_a_valid_job_spec() -> None:
    for name in ("jobset.yaml", "trainjob.yaml", "rayjob.yaml", "raycluster.yaml", "leaderworkerset.yaml",
                 "deployment.yaml", "notebook-statefulset.yaml", "pod-group.yaml"):
        obj = example(name)
        plan = kind_of(obj).roles(obj, [runtime()])
        spec = JobSpec(name="x", queue="team-a", roles=plan.roles)
        assert spec.pods == sum(r.replicas for r in plan.roles)


def test_templates_carry_the_first_containers_command_and_the_pods_resources() -> None:
    plan = kind_of(example("trainjob.yaml")).roles(example("trainjob.yaml"), [runtime()])
    node = plan.roles[0].template
    assert (node.image, node.command) == ("registry.example/llama-ft:1.2",
                                          ["torchrun", "finetune.py", "--config", "/configs/llama.yaml"])
    assert (node.resources.cpu, node.resources.memory) == ("32", "256Gi")
    submitter = kind_of(example("rayjob.yaml")).roles(example("rayjob.yaml")).roles[-1].template
    assert (submitter.image, submitter.resources.cpu, submitter.resources.memory) == (
        "rayproject/ray:2.46.0", "500m", "200Mi")
    jobset = kind_of(example("jobset.yaml")).roles(example("jobset.yaml")).roles[1].template
    assert jobset.secret_env()["HF_TOKEN"].name == "hf"


def test_the_role_map_names_each_kinds_own_pod_set() -> None:
    obj = example("jobset.yaml")
    obj["spec"]["replicatedJobs"][1]["name"] = "Workers_GPU"
    plan = kind_of(obj).roles(obj)
    assert [r.name for r in plan.roles] == ["coordinator", role_name("Workers_GPU")]
    assert plan.pod_sets == {"coordinator": "coordinator", role_name("Workers_GPU"): "Workers_GPU"}
    assert plan.role_of("Workers_GPU") == role_name("Workers_GPU")
    groups = kind_of(example("pod-group.yaml")).roles(example("pod-group.yaml")).pod_sets
    assert sorted(groups) == ["launcher", "worker"] and all(v.startswith("shape-") for v in groups.values())


def _jobset(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = example("jobset.yaml")
    change(obj["spec"]["replicatedJobs"][1])
    return obj


def _ray(change: Callable[[dict[str, Any]], None], name: str = "rayjob.yaml") -> dict[str, Any]:
    obj = example(name)
    change(obj)
    return obj


def _trainjob(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = example("trainjob.yaml")
    change(obj)
    return obj


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change setting ``a.b.0.c`` (list indexes as numbers); None deletes."""
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        here: Any = obj
        for key in parents:
            here = here[int(key)] if key.isdigit() else here.setdefault(key, {})
        if value is None:
            here.pop(last, None)
        else:
            here[last] = value
    return change


@pytest.mark.parametrize(("obj", "roles"), [
    # JobSet: replicas default 1; a Job runs min(parallelism, completions) pods at once
    (_jobset(_set("replicas", None)), [("coordinator", 1, 0, None), ("workers", 2, 4, "a100")]),
    (_jobset(_set("template.spec.completions", 1)), [("coordinator", 1, 0, None), ("workers", 2, 4, "a100")]),
    (_jobset(_set("template.spec.parallelism", None)), [("coordinator", 1, 0, None), ("workers", 2, 4, "a100")]),
    # a replicatedJob making no pods is no role
    (_jobset(_set("replicas", 0)), [("coordinator", 1, 0, None)]),
    # Ray: replicas within [minReplicas, maxReplicas], times numOfHosts; a suspended worker group has none
    (_ray(_set("spec.rayClusterSpec.workerGroupSpecs.0.numOfHosts", 2)),
     [("head", 1, 0, None), ("gpu-workers", 4, 2, "a100"), ("cpu-workers", 3, 0, None), ("submitter", 1, 0, None)]),
    (_ray(_set("spec.rayClusterSpec.workerGroupSpecs.1.replicas", 9)),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None), ("submitter", 1, 0, None)]),
    (_ray(_set("spec.rayClusterSpec.workerGroupSpecs.1.replicas", None)),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None), ("submitter", 1, 0, None)]),
    (_ray(_set("spec.rayClusterSpec.workerGroupSpecs.1.minReplicas", 0)),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None), ("submitter", 1, 0, None)]),
    (_ray(_set("spec.rayClusterSpec.workerGroupSpecs.1.suspend", True)),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("submitter", 1, 0, None)]),
    # no submitter pod in HTTPMode / InteractiveMode; SidecarMode puts it in the head pod
    (_ray(_set("spec.submissionMode", "HTTPMode")),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None)]),
    (_ray(_set("spec.submissionMode", "InteractiveMode")),
     [("head", 1, 0, None), ("gpu-workers", 2, 2, "a100"), ("cpu-workers", 3, 0, None)]),
    # a TrainJob without numNodes: the runtime's mlPolicy.numNodes
    (_trainjob(_set("spec.trainer.numNodes", None)), [("node", 1, 8, "a100")]),
    # without resourcesPerNode: the runtime's container (no GPUs asked)
    (_trainjob(_set("spec.trainer.resourcesPerNode", None)), [("node", 2, 0, "a100")]),
])
def test_counts_follow_each_controller(obj: dict[str, Any], roles: Roles) -> None:
    assert _roles(obj) == roles


def test_ray_sidecar_mode_adds_the_submitter_container_to_the_head() -> None:
    obj = _ray(_set("spec.submissionMode", "SidecarMode"))
    head = kind_of(obj).roles(obj).roles[0]
    assert (head.name, head.template.resources.cpu, head.template.resources.memory) == ("head", "2500m", "8392Mi")


def test_ray_cluster_worker_counts() -> None:
    obj = _ray(_set("spec.workerGroupSpecs.0.maxReplicas", 1), "raycluster.yaml")
    assert _roles(obj) == [("head", 1, 0, None), ("workers", 1, 1, "a100")]


def _lws(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = example("leaderworkerset.yaml")
    change(obj)
    return obj


@pytest.mark.parametrize(("obj", "roles"), [
    (_lws(_set("spec.leaderWorkerTemplate.leaderTemplate", None)), [("main", 4, 4, "a100")]),
    (_lws(_set("spec.leaderWorkerTemplate.size", 1)), [("leader", 2, 4, "a100")]),
    (_lws(_set("spec.replicas", None)), [("leader", 1, 4, "a100"), ("worker", 1, 4, "a100")]),
])
def test_leaderworkerset_groups(obj: dict[str, Any], roles: Roles) -> None:
    assert _roles(obj) == roles


def _runtime_with(jobs: list[dict[str, Any]], ml: dict[str, Any] | None) -> dict[str, Any]:
    rt = runtime()
    rt["spec"]["template"]["spec"]["replicatedJobs"] = jobs
    if ml is None:
        rt["spec"].pop("mlPolicy")
    else:
        rt["spec"]["mlPolicy"] = ml
    return rt


def _rj(name: str, ancestor: str | None = None, parallelism: int | None = None, replicas: int | None = None,
        gpus: int = 0) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"template": {"spec": {"containers": [
        {"name": "node" if ancestor == "trainer" else name, "image": "img",
         "resources": {"limits": {"nvidia.com/gpu": gpus}} if gpus else {}}]}}}}
    if ancestor:
        template["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}}
    if parallelism is not None:
        template["spec"]["parallelism"] = parallelism
    rj: dict[str, Any] = {"name": name, "template": template}
    if replicas is not None:
        rj["replicas"] = replicas
    return rj


@pytest.mark.parametrize(("jobs", "ml", "num_nodes", "roles"), [
    # initializers run once each (trainer forces their replicas to 1), the trainer numNodes times
    ([_rj("dataset-initializer", "dataset-initializer", replicas=3), _rj("model-initializer", "model-initializer"),
      _rj("node", "trainer", gpus=8)], {"numNodes": 1, "torch": {}}, 4,
     [("dataset-initializer", 1, 0), ("model-initializer", 1, 0), ("node", 4, 8)]),
    # a plain runtime (no mlPolicy): the trainer job's parallelism, or numNodes when the TrainJob gives it
    ([_rj("node", "trainer", parallelism=2, gpus=1)], None, None, [("node", 2, 1)]),
    ([_rj("node", "trainer", parallelism=2, gpus=1)], None, 3, [("node", 3, 1)]),
    # MPI with runLauncherAsNode: numNodes sizes the job named node, one less than asked
    ([_rj("launcher", "trainer"), _rj("node", gpus=1)],
     {"numNodes": 1, "mpi": {"runLauncherAsNode": True}}, 4, [("launcher", 1, 0), ("node", 3, 1)]),
    ([_rj("launcher", "trainer"), _rj("node", gpus=1)], {"numNodes": 1, "mpi": {}}, 4,
     [("launcher", 1, 0), ("node", 4, 1)]),
    # a job of no trainer step keeps its replicas x parallelism
    ([_rj("node", "trainer", gpus=1), _rj("evaluator", replicas=2, parallelism=2)], {"numNodes": 2}, None,
     [("node", 2, 1), ("evaluator", 4, 0)]),
])
def test_trainjob_roles_follow_trainer(jobs: list[dict[str, Any]], ml: dict[str, Any] | None,
                                       num_nodes: int | None, roles: list[tuple[str, int, int]]) -> None:
    obj = example("trainjob.yaml")
    obj["spec"]["trainer"] = {"image": "registry.example/t:1"} | ({"numNodes": num_nodes} if num_nodes else {})
    obj["spec"].pop("podSpecOverrides")
    plan = kind_of(obj).roles(obj, [_runtime_with(jobs, ml)])
    assert [(r.name, r.replicas, r.template.resources.gpus) for r in plan.roles] == roles


def test_trainjob_overrides_reach_only_the_jobs_they_target() -> None:
    obj = example("trainjob.yaml")
    rt = _runtime_with([_rj("node", "trainer", gpus=1), _rj("evaluator")], {"numNodes": 1, "torch": {}})
    plan = kind_of(obj).roles(obj, [rt])
    assert [(r.name, r.template.resources.gpu_type, r.template.image) for r in plan.roles] == [
        ("node", "a100", "registry.example/llama-ft:1.2"), ("evaluator", None, "img")]


def test_a_namespaced_training_runtime() -> None:
    obj = example("trainjob.yaml")
    obj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    rt = runtime()
    rt["kind"], rt["metadata"]["namespace"] = "TrainingRuntime", "team-a"
    kind = kind_of(obj)
    (ref,) = kind.references(obj)
    assert (ref.identity.plural, ref.identity.namespaced, ref.name, ref.namespace) == (
        "trainingruntimes", True, "torch-distributed", "team-a")
    assert [r.name for r in kind.roles(obj, [rt]).roles] == ["node"]
    (cluster_ref,) = kind.references(example("trainjob.yaml"))
    assert (cluster_ref.identity.plural, cluster_ref.identity.namespaced, cluster_ref.namespace) == (
        "clustertrainingruntimes", False, None)


def test_pod_group_of_one_shape_is_main_and_quantities_compare_by_value() -> None:
    obj = example("pod-group.yaml")
    launcher = obj["items"][0]
    obj["items"] = obj["items"][1:]
    for p in obj["items"]:
        p["metadata"]["annotations"]["muster.dev/pod-group-size"] = "2"
    obj["items"][1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"  # "4" is 4
    assert _roles(obj) == [("main", 2, 4, "a100")]
    obj["items"].append(launcher | {"metadata": {**launcher["metadata"], "name": "a-launcher"}})
    obj["items"][-1]["spec"]["containers"][0]["name"] = "worker"
    for p in obj["items"]:
        p["metadata"]["annotations"]["muster.dev/pod-group-size"] = "3"
    names = [r[0] for r in _roles(obj)]
    assert len(set(names)) == 2 and all(n.startswith("worker-") for n in names)


def _h(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:6]


@pytest.mark.parametrize(("name", "role"), [
    ("workers", "workers"),
    ("Workers_GPU", f"workers-gpu-{_h('Workers_GPU')}"),
    ("a" * 40, "a" * 25 + "-" + _h("a" * 40)),
    ("__", "r-" + _h("__")),
])
def test_role_names_are_dns_labels_of_at_most_32(name: str, role: str) -> None:
    assert role_name(name) == role
    assert len(role) <= 32


def test_identities() -> None:
    got = [(k.identity.api_version, k.identity.kind, k.identity.plural, k.identity.namespaced, k.suspendable)
           for k in KINDS]
    assert got == [
        ("batch/v1", "Job", "jobs", True, True),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True, True),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True, True),
        ("ray.io/v1", "RayJob", "rayjobs", True, True),
        ("ray.io/v1", "RayCluster", "rayclusters", True, True),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", True, False),
        ("apps/v1", "Deployment", "deployments", True, False),
        ("apps/v1", "StatefulSet", "statefulsets", True, False),
        ("v1", "Pod", "pods", True, False),
    ]
    assert kind_for("ray.io/v1", "RayJob") is KINDS[3]


def test_the_batch_job_of_the_kube_native_path() -> None:
    job = yaml.safe_load((ROOT / "examples" / "jobs" / "kube-job.yaml").read_text(encoding="utf-8"))
    assert _roles(job) == [("main", 2, 4, "a100")]
