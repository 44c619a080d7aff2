"""Rendering an admitted attempt into a batch/v1 Job: table tests plus offline OpenAPI validation."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import kubernetes_validate
import pytest

from schemas.decisions import NodePods, PlacementPlan
from services.dispatcher.render import ANY_GPU, CheckpointSettings, DomainPin, JobTemplate, planned_nodes, render_job
from services.runtime.kube.names import DNS1123_LABEL, LABEL_VALUE
from tests.kube.builders import placement, template

K8S_VERSION = "1.30"

CASES: list[tuple[str, JobTemplate, Any, DomainPin | None]] = [
    ("two pods on one node", template(), placement(("east-a100-0", 2)), None),
    ("gang over two nodes", template(replicas=4), placement(("east-a100-0", 2), ("east-a100-1", 2)), None),
    ("cpu-only, no gpu type", template(gpus_per_pod=0, gpu_type=ANY_GPU, replicas=1, priority_class=""),
     placement(("east-t4-0", 1)), None),
    ("elastic admission below replicas", template(replicas=8), placement(("east-a100-2", 3)), None),
    ("checkpoint on a volume", template(checkpoint=CheckpointSettings("/ckpt", volume_claim="ckpt-pvc")),
     placement(("east-a100-0", 2)), None),
    ("checkpoint dir only", template(checkpoint=CheckpointSettings("/scratch/ckpt")),
     placement(("east-a100-0", 2)), None),
    ("pinned to a rack", template(replicas=2), placement(("east-a100-0", 1), ("east-a100-1", 1)),
     DomainPin("topology.muster.dev/rack", "rack-0")),
    ("odd id, long id, user metadata",
     template(job_id="Team_A/Sweep#42:" + "x" * 80, queue="Team A", env={"LR": "0.1", "MUSTER_JOB_ID": "spoof"},
              labels={"app": "sweep", "muster.dev/job-id": "spoof"}, annotations={"note": "hi"},
              node_selector={"pool": "training"}, tolerations=frozenset({"dedicated", "nvidia.com/gpu"}),
              max_runtime_s=3600.5, ttl_seconds_after_finished=600, service_account="trainer",
              working_dir="/work", args=("--epochs", "3")),
     placement(("east-a100-3", 2)), None),
]


@pytest.mark.parametrize(("label", "tpl", "place", "domain"), CASES, ids=[c[0] for c in CASES])
def test_rendered_job_is_valid_and_complete(label: str, tpl: JobTemplate, place: Any,
                                            domain: DomainPin | None) -> None:
    attempt = 3
    job = render_job(tpl, attempt, place, domain)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)

    gang = place.pods
    meta, spec = job["metadata"], job["spec"]
    assert DNS1123_LABEL.match(meta["name"]) and len(meta["name"]) <= 58
    assert meta["name"].endswith(f"-a{attempt}")
    assert meta["namespace"] == tpl.namespace
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed", gang, gang, 0)
    pod_meta, pod = spec["template"]["metadata"], spec["template"]["spec"]
    for m in (meta, pod_meta):
        assert m["annotations"]["muster.dev/job-id"] == tpl.job_id
        assert m["annotations"]["muster.dev/attempt"] == str(attempt)
        assert m["labels"]["muster.dev/attempt"] == str(attempt)
        assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in m["labels"].values())
        assert json.loads(m["annotations"]["muster.dev/placement"]) == planned_nodes(place)
    assert pod["restartPolicy"] == "Never"
    assert pod["terminationGracePeriodSeconds"] == int(-(-tpl.grace_period_s // 1))
    [container] = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MUSTER_JOB_ID"] == tpl.job_id and env["MUSTER_ATTEMPT"] == str(attempt)
    assert ("MUSTER_CHECKPOINT_DIR" in env) == (tpl.checkpoint is not None)
    assert [e["name"] for e in container["env"]].count("MUSTER_JOB_ID") == 1
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    [expr] = term["matchExpressions"]
    if domain is None:
        assert expr == {"key": "kubernetes.io/hostname", "operator": "In",
                        "values": sorted({a.node for a in place.nodes})}
    else:
        assert expr == {"key": domain.label, "operator": "In", "values": [domain.value]}
    gpu_tolerations = [t for t in pod.get("tolerations", []) if t["key"] == "nvidia.com/gpu"]
    if tpl.gpus_per_pod:
        assert container["resources"]["limits"] == {"nvidia.com/gpu": str(tpl.gpus_per_pod)}
        assert gpu_tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    else:
        assert "limits" not in container.get("resources", {})
        assert gpu_tolerations == []
    assert pod.get("priorityClassName", "") == tpl.priority_class


def test_every_attempt_gets_its_own_deterministic_name() -> None:
    tpl, place = template(), placement(("n1", 2))
    assert render_job(tpl, 0, place) == render_job(tpl, 0, place)
    assert render_job(tpl, 0, place)["metadata"]["name"] == "train-1-a0"
    assert render_job(tpl, 1, place)["metadata"]["name"] == "train-1-a1"


def test_fields_are_carried_over() -> None:
    tpl = template(
        job_id="job-7", queue="team-b", env=MappingProxyType({"A": "1"}), cpu_m=1500, memory_mb=2048,
        checkpoint=CheckpointSettings("/ckpt", volume_claim="pvc-1"), node_selector={"pool": "training"},
        tolerations=frozenset({"dedicated"}), max_runtime_s=59.2,
    )
    job = render_job(tpl, 2, placement(("n1", 1), ("n2", 1)))
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["metadata"]["labels"]["muster.dev/queue"] == "team-b"
    assert job["metadata"]["annotations"]["muster.dev/cluster"] == "east"
    assert job["spec"]["activeDeadlineSeconds"] == 60
    assert container["resources"]["requests"] == {"cpu": "1500m", "memory": "2048Mi"}
    assert container["command"] == ["python", "train.py"]
    assert container["env"] == [
        {"name": "A", "value": "1"}, {"name": "MUSTER_JOB_ID", "value": "job-7"},
        {"name": "MUSTER_ATTEMPT", "value": "2"}, {"name": "MUSTER_CHECKPOINT_DIR", "value": "/ckpt"},
    ]
    assert container["volumeMounts"] == [{"name": "checkpoint", "mountPath": "/ckpt"}]
    assert pod["volumes"] == [{"name": "checkpoint", "persistentVolumeClaim": {"claimName": "pvc-1"}}]
    assert pod["nodeSelector"] == {"pool": "training", "muster.dev/gpu-type": "a100"}
    assert {"key": "dedicated", "operator": "Exists"} in pod["tolerations"]


def test_odd_job_ids_keep_the_exact_id_in_annotations_and_stay_distinct() -> None:
    a = render_job(template(job_id="Sweep_1"), 0, placement(("n1", 2)))
    b = render_job(template(job_id="sweep-1"), 0, placement(("n1", 2)))
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert a["metadata"]["labels"]["muster.dev/job-id"] == "Sweep_1"  # a valid label value is kept
    assert a["metadata"]["annotations"]["muster.dev/job-id"] == "Sweep_1"


@pytest.mark.parametrize(
    ("tpl", "place", "message"),
    [
        (template(replicas=2), placement(("n1", 3)), "at most 2"),
        (template(), PlacementPlan.model_construct(cluster="east", nodes=[NodePods.model_construct(node="n1", pods=0)]),
         "no pods"),
        (template(cpu_m=-1), placement(("n1", 1)), "negative"),
    ],
)
def test_impossible_admissions_are_refused(tpl: JobTemplate, place: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_job(tpl, 0, place)


def test_negative_attempt_is_refused() -> None:
    with pytest.raises(ValueError, match="attempt"):
        render_job(template(), -1, placement(("n1", 1)))
