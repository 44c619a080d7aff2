"""Job controller, scheduler, kubelet, node loss and deletion propagation, observed over HTTP."""

from __future__ import annotations

import functools
from typing import Any

import aiohttp

from services.kubesim import KubeSim
from services.kubesim.kubelet import KubeletProfile
from tests.kubesim.builders import CLUSTER_FILE, Api, eventually, job, pod

PODS = "/api/v1/namespaces/team-a/pods"
JOBS = "/apis/batch/v1/namespaces/team-a/jobs"


async def _job_pods(api: Api, name: str) -> list[dict[str, Any]]:
    _, body = await api.get(PODS, labelSelector=f"job-name={name}")
    return list(body["items"])


async def _job(api: Api, name: str) -> dict[str, Any]:
    return dict((await api.get(f"{JOBS}/{name}"))[1])


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


async def test_indexed_job_runs_to_completion(api: Api) -> None:
    status, created = await api.post(JOBS, job("train", completions=3, parallelism=3, duration=0.3, gpus=8,
                                               indexed=True))
    assert status == 201
    assert created["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"]

    async def running() -> list[dict[str, Any]] | None:
        pods = await _job_pods(api, "train")
        return pods if len(pods) == 3 and all(p["status"]["phase"] == "Running" for p in pods) else None

    pods = await eventually(running)
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]
    for p in pods:
        idx = p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        assert p["metadata"]["name"].startswith(f"train-{idx}-")
        ref = p["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("Job", "train", True)
        assert any(e["name"] == "JOB_COMPLETION_INDEX" for e in p["spec"]["containers"][0]["env"])
        assert p["status"]["podIP"] and p["spec"]["nodeName"].startswith("east-a100-")
    assert len({p["spec"]["nodeName"] for p in pods}) == 3  # 8 GPUs each: one pod per node
    mid = await _job(api, "train")
    assert mid["status"]["active"] == 3 and mid["status"]["startTime"]

    async def complete() -> dict[str, Any] | None:
        j = await _job(api, "train")
        return j if _conditions(j).get("Complete") == "True" else None

    done = await eventually(complete)
    assert done["status"]["succeeded"] == 3 and done["status"]["active"] == 0
    assert done["status"]["completedIndexes"] == "0-2" and done["status"]["completionTime"]
    assert all(p["status"]["phase"] == "Succeeded" for p in await _job_pods(api, "train"))


async def test_a_plain_job_without_a_duration_completes_as_kubectl_create_job_expects(api: Api) -> None:
    await api.post(JOBS, job("hello", duration=None))

    async def complete() -> dict[str, Any] | None:
        j = await _job(api, "hello")
        return j if _conditions(j).get("Complete") == "True" else None

    assert (await eventually(complete, within=10.0))["status"]["succeeded"] == 1


async def test_suspend_and_resume(api: Api) -> None:
    await api.post(JOBS, job("s", completions=2, parallelism=2, duration=None, suspend=True))
    j = await eventually(lambda: _suspended(api, "s"))
    assert j["status"].get("active", 0) == 0 and await _job_pods(api, "s") == []
    await api.patch(f"{JOBS}/s", {"spec": {"suspend": False}}, "application/merge-patch+json")
    await eventually(lambda: _count_phase(api, "s", "Running", 2))
    await api.patch(f"{JOBS}/s", {"spec": {"suspend": True}}, "application/merge-patch+json")
    await eventually(lambda: _suspended(api, "s"))
    await eventually(lambda: _no_pods(api, "s"))


async def _suspended(api: Api, name: str) -> dict[str, Any] | None:
    j = await _job(api, name)
    return j if _conditions(j).get("Suspended") == "True" else None


async def _no_pods(api: Api, name: str) -> bool:
    return await _job_pods(api, name) == []


async def _count_phase(api: Api, name: str, phase: str, n: int) -> bool:
    return sum(1 for p in await _job_pods(api, name) if p["status"]["phase"] == phase) == n


async def test_backoff_limit_fails_job(api: Api) -> None:
    await api.post(JOBS, job("bad", duration=0.05, exit_code=3, backoffLimit=2))

    async def failed() -> dict[str, Any] | None:
        j = await _job(api, "bad")
        return j if _conditions(j).get("Failed") == "True" else None

    j = await eventually(failed)
    assert j["status"]["failed"] == 3
    cond = next(c for c in j["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "BackoffLimitExceeded"
    pods = await _job_pods(api, "bad")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Failed" for p in pods)
    term = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3


async def test_fail_pod_and_pod_failure_policy(api: Api, sim: KubeSim) -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    await api.post(JOBS, job("pfp", duration=None, backoffLimit=5, podFailurePolicy=policy))
    pods = await eventually(lambda: _running(api, "pfp"))
    status, _ = await api.post(f"/kubesim/namespaces/team-a/pods/{pods[0]['metadata']['name']}/fail",
                               {"exitCode": 42})
    assert status == 200

    async def failed() -> dict[str, Any] | None:
        j = await _job(api, "pfp")
        return j if _conditions(j).get("Failed") == "True" else None

    j = await eventually(failed)
    assert next(c for c in j["status"]["conditions"] if c["type"] == "Failed")["reason"] == "PodFailurePolicy"


async def _running(api: Api, name: str) -> list[dict[str, Any]] | None:
    pods = await _job_pods(api, name)
    return pods if pods and all(p["status"]["phase"] == "Running" for p in pods) else None


async def test_scheduler_honours_taints_selectors_affinity_and_capacity(api: Api) -> None:
    untolerated = pod("plain", gpus=0)
    untolerated["spec"].pop("tolerations")
    await api.post(PODS, untolerated)
    await api.post(PODS, pod("t4", gpus=4, nodeSelector={"nvidia.com/gpu.product": "t4"}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.muster.dev/rack", "operator": "In", "values": ["rack-1"]},
                              {"key": "pool", "operator": "Exists"}]}]}}}
    await api.post(PODS, pod("rack1", gpus=8, affinity=affinity))
    await api.post(PODS, pod("huge", gpus=16))

    async def settled() -> dict[str, dict[str, Any]] | None:
        _, body = await api.get(PODS)
        by_name = {p["metadata"]["name"]: p for p in body["items"]}
        sched = {n: _conditions(p).get("PodScheduled") for n, p in by_name.items()}
        return by_name if len(sched) == 4 and None not in sched.values() else None

    pods = await eventually(settled)
    assert pods["t4"]["spec"]["nodeName"].startswith("east-t4-")
    assert pods["rack1"]["spec"]["nodeName"] in ("east-a100-2", "east-a100-3")
    for name in ("plain", "huge"):
        assert "nodeName" not in pods[name]["spec"]
        cond = next(c for c in pods[name]["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    plain_cond = next(c for c in pods["plain"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "untolerated taint" in plain_cond["message"]
    _, events = await api.get("/api/v1/namespaces/team-a/events", fieldSelector="reason=FailedScheduling")
    assert {e["involvedObject"]["name"] for e in events["items"]} == {"plain", "huge"}

    # Fill the two t4 nodes: 4 GPUs each, the third 4-GPU pod waits until one is deleted.
    await api.post(PODS, pod("t4b", gpus=4, nodeSelector={"nvidia.com/gpu.product": "t4"}))
    await api.post(PODS, pod("t4c", gpus=4, nodeSelector={"nvidia.com/gpu.product": "t4"}))

    async def t4c_state() -> str | None:
        _, p = await api.get(f"{PODS}/t4c")
        return _conditions(p).get("PodScheduled")

    assert await eventually(t4c_state) == "False"
    await api.delete(f"{PODS}/t4", gracePeriodSeconds="0")

    async def t4c_bound() -> bool:
        _, p = await api.get(f"{PODS}/t4c")
        return bool(p["spec"].get("nodeName"))

    await eventually(t4c_bound)


async def test_node_not_ready_evicts_pods(api: Api, sim: KubeSim) -> None:
    await api.post(PODS, pod("victim", gpus=8, nodeSelector={"kubernetes.io/hostname": "east-a100-1"}))

    async def phase() -> str:
        _, p = await api.get(f"{PODS}/victim")
        return str(p["status"]["phase"])

    await eventually(lambda: _is(phase, "Running"))
    status, _ = await api.post("/kubesim/nodes/east-a100-1/ready", {"ready": False})
    assert status == 200
    await eventually(lambda: _is(phase, "Failed"))
    _, p = await api.get(f"{PODS}/victim")
    assert p["status"]["reason"] == "NodeLost"
    _, node = await api.get("/api/v1/nodes/east-a100-1")
    assert _conditions(node)["Ready"] == "Unknown"
    assert any(t["key"] == "node.kubernetes.io/unreachable" for t in node["spec"]["taints"])
    await api.post(PODS, pod("waiter", gpus=8, nodeSelector={"kubernetes.io/hostname": "east-a100-1"}))
    _, waiting = await api.get(f"{PODS}/waiter")
    assert "nodeName" not in waiting["spec"]
    sim.set_node_ready("east-a100-1", True)

    async def waiter_running() -> bool:
        _, w = await api.get(f"{PODS}/waiter")
        return bool(w["status"]["phase"] == "Running")

    await eventually(waiter_running)


async def _is(fn: Any, value: str) -> bool:
    return bool(await fn() == value)


async def test_delete_propagation(api: Api) -> None:
    for name in ("bg", "orphan", "fg"):
        await api.post(JOBS, job(name, completions=2, parallelism=2, duration=None))
        await eventually(functools.partial(_count_phase, api, name, "Running", 2))

    assert (await api.delete(f"{JOBS}/bg"))[0] == 200
    await eventually(lambda: _no_pods(api, "bg"))

    await api.delete(f"{JOBS}/orphan", propagationPolicy="Orphan")
    assert (await api.get(f"{JOBS}/orphan"))[0] == 404
    pods = await _job_pods(api, "orphan")
    assert len(pods) == 2 and all(not p["metadata"].get("ownerReferences") for p in pods)

    status, deleting = await api.delete(f"{JOBS}/fg", {"kind": "DeleteOptions", "propagationPolicy": "Foreground"})
    assert status == 200 and "foregroundDeletion" in deleting["metadata"]["finalizers"]
    assert deleting["metadata"]["deletionTimestamp"]

    async def fg_gone() -> bool:
        return (await api.get(f"{JOBS}/fg"))[0] == 404 and await _no_pods(api, "fg")

    await eventually(fg_gone)


async def test_graceful_pod_termination() -> None:
    profile = KubeletProfile("test", (0.0, 0.0), 0.0, 0.3)
    sim = KubeSim.from_cluster_file(CLUSTER_FILE, profile="zero")
    sim.kubelet.profile = profile
    async with sim.serve() as url, aiohttp.ClientSession() as session:
        api = Api(session, url)
        await api.post(PODS, pod("g"))

        async def running() -> bool:
            return bool((await api.get(f"{PODS}/g"))[1]["status"]["phase"] == "Running")

        await eventually(running)
        status, body = await api.delete(f"{PODS}/g", gracePeriodSeconds="10")
        assert status == 200 and body["metadata"]["deletionTimestamp"]
        assert body["metadata"]["deletionGracePeriodSeconds"] == 10
        _, still = await api.get(f"{PODS}/g")
        assert still["metadata"]["deletionTimestamp"]

        async def gone() -> bool:
            return (await api.get(f"{PODS}/g"))[0] == 404

        await eventually(gone, within=3)


async def test_the_kubelet_rejects_a_directly_bound_pod_that_does_not_fit() -> None:
    """Pods bound past the scheduler are admitted against the node, terminating pods still counted."""
    profile = KubeletProfile("test", (0.0, 0.0), 0.0, 0.5)
    sim = KubeSim.from_cluster_file(CLUSTER_FILE, profile="zero")
    sim.kubelet.profile = profile
    async with sim.serve() as url, aiohttp.ClientSession() as session:
        api = Api(session, url)

        async def phase(name: str) -> str:
            return str((await api.get(f"{PODS}/{name}"))[1]["status"].get("phase"))

        await api.post(PODS, pod("first", gpus=6, nodeName="east-a100-0", terminationGracePeriodSeconds=30))
        await eventually(lambda: _is(functools.partial(phase, "first"), "Running"))
        await api.post(PODS, pod("second", gpus=4, nodeName="east-a100-0"))
        await eventually(lambda: _is(functools.partial(phase, "second"), "Failed"))
        _, second = await api.get(f"{PODS}/second")
        assert second["status"]["reason"] == "OutOfnvidia.com/gpu"
        assert "requested: 4, used: 6, capacity: 8" in second["status"]["message"]
        await api.post(PODS, pod("small", gpus=2, nodeName="east-a100-0"))
        await eventually(lambda: _is(functools.partial(phase, "small"), "Running"))

        await api.delete(f"{PODS}/first")  # terminating for up to 0.5 s: its GPUs are still in use
        await api.post(PODS, pod("while-terminating", gpus=6, nodeName="east-a100-0"))
        await eventually(lambda: _is(functools.partial(phase, "while-terminating"), "Failed"))
        await eventually(lambda: _gone(api, "first"))
        await api.post(PODS, pod("after", gpus=6, nodeName="east-a100-0"))
        await eventually(lambda: _is(functools.partial(phase, "after"), "Running"))
        _, events = await api.get("/api/v1/namespaces/team-a/events", fieldSelector="reason=OutOfnvidia.com/gpu")
        assert {e["involvedObject"]["name"] for e in events["items"]} == {"second", "while-terminating"}


async def _gone(api: Api, name: str) -> bool:
    return (await api.get(f"{PODS}/{name}"))[0] == 404
