"""CRUD, errors, optimistic concurrency, selectors, paging and every PATCH type over HTTP."""

from __future__ import annotations

from tests.kubesim.builders import Api, job, pod

PODS = "/api/v1/namespaces/team-a/pods"
JOBS = "/apis/batch/v1/namespaces/team-a/jobs"


async def test_discovery_and_version(api: Api) -> None:
    status, body = await api.get("/api")
    assert status == 200 and body["versions"] == ["v1"]
    _, groups = await api.get("/apis")
    assert {g["name"] for g in groups["groups"]} == {
        "batch", "coordination.k8s.io", "apps", "jobset.x-k8s.io", "trainer.kubeflow.org", "ray.io",
        "leaderworkerset.x-k8s.io", "autoscaling.x-k8s.io"}  # storage only: the workload kinds Muster queues,
    # and cluster-autoscaler's ProvisioningRequests
    _, core = await api.get("/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "pods/log", "nodes", "nodes/status", "namespaces", "events"} <= names
    _, batch = await api.get("/apis/batch/v1")
    assert [r["name"] for r in batch["resources"]] == ["jobs", "jobs/status"]
    _, version = await api.get("/version")
    assert version["major"] == "1"


async def test_nodes_carry_gpus_topology_and_taints(api: Api) -> None:
    _, nodes = await api.get("/api/v1/nodes")
    by_name = {n["metadata"]["name"]: n for n in nodes["items"]}
    assert sorted(by_name) == [f"east-a100-{i}" for i in range(4)] + ["east-t4-0", "east-t4-1"]
    a100 = by_name["east-a100-3"]
    labels = a100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "a100"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["topology.muster.dev/rack"] == "rack-1"
    assert labels["topology.muster.dev/block"] == "b0"
    assert labels["topology.muster.dev/cluster"] == "east"
    assert labels["topology.kubernetes.io/zone"] == "east-1a"
    assert labels["kubernetes.io/hostname"] == "east-a100-3"
    assert labels["pool"] == "training"
    assert a100["metadata"]["annotations"]["muster.dev/nvlink-groups"] == "4,4"
    assert a100["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert a100["status"]["capacity"]["cpu"] == "96"
    assert a100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in a100["status"]["conditions"])


async def test_create_get_update_delete_and_errors(api: Api) -> None:
    status, created = await api.post(PODS, pod("p1", labels={"app": "a"}, schedulingGates=[{"name": "hold"}]))
    assert status == 201
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    status, dup = await api.post(PODS, pod("p1"))
    assert (status, dup["reason"], dup["code"]) == (409, "AlreadyExists", 409)
    status, missing = await api.get(f"{PODS}/nope")
    assert (status, missing["kind"], missing["reason"]) == (404, "Status", "NotFound")
    status, _ = await api.get("/api/v1/namespaces/team-a/widgets")
    assert status == 404
    status, _ = await api.post("/api/v1/namespaces/ghost/pods", pod("x", namespace="ghost"))
    assert status == 404

    current = (await api.get(f"{PODS}/p1"))[1]
    stale = dict(current, metadata=dict(current["metadata"]))
    current["metadata"]["labels"]["app"] = "b"
    status, updated = await api.put(f"{PODS}/p1", current)
    assert status == 200 and updated["metadata"]["labels"]["app"] == "b"
    assert int(updated["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    status, conflict = await api.put(f"{PODS}/p1", stale)
    assert (status, conflict["reason"]) == (409, "Conflict")

    status, gone = await api.delete(f"{PODS}/p1")
    assert status == 200 and gone["metadata"]["name"] == "p1"
    assert (await api.get(f"{PODS}/p1"))[0] == 404
    assert (await api.delete(f"{PODS}/p1"))[0] == 404


async def test_generate_name_and_validation(api: Api) -> None:
    body = pod("ignored")
    body["metadata"] = {"generateName": "worker-", "namespace": "team-a"}
    status, created = await api.post(PODS, body)
    assert status == 201 and created["metadata"]["name"].startswith("worker-")
    assert len(created["metadata"]["name"]) == len("worker-") + 5

    nameless = pod("x")
    del nameless["metadata"]["name"]
    status, err = await api.post(PODS, nameless)
    assert (status, err["reason"]) == (422, "Invalid")
    assert err["details"]["causes"][0]["field"] == "metadata.name"

    bad_job = job("broken")
    bad_job["spec"]["template"]["spec"]["containers"] = []
    status, err = await api.post(JOBS, bad_job)
    assert status == 422 and "containers" in err["message"]

    always = job("always")
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert (await api.post(JOBS, always))[0] == 422
    assert (await api.post(PODS, pod("Upper-Case")))[0] == 422
    assert (await api.call("POST", PODS, b"{not json"))[0] == 400
    assert (await api.call("PUT", PODS, pod("p")))[0] == 405


async def test_label_and_field_selectors(api: Api) -> None:
    for name, labels in [("a", {"tier": "x", "team": "red"}), ("b", {"tier": "y"}), ("c", {"team": "blue"})]:
        await api.post(PODS, pod(name, labels=labels, schedulingGates=[{"name": "hold"}]))

    async def names(**params: str) -> list[str]:
        status, body = await api.get(PODS, **params)
        assert status == 200, body
        return [p["metadata"]["name"] for p in body["items"]]

    assert await names(labelSelector="tier=x") == ["a"]
    assert await names(labelSelector="tier!=x") == ["b", "c"]
    assert await names(labelSelector="tier in (x,y)") == ["a", "b"]
    assert await names(labelSelector="tier notin (x)") == ["b", "c"]
    assert await names(labelSelector="team") == ["a", "c"]
    assert await names(labelSelector="!team") == ["b"]
    assert await names(labelSelector="tier=x,team=red") == ["a"]
    assert await names(fieldSelector="metadata.name=b") == ["b"]
    assert await names(fieldSelector="status.phase=Pending,metadata.name!=a") == ["b", "c"]
    assert await names(fieldSelector="spec.nodeName=") == ["a", "b", "c"]
    assert (await api.get(PODS, fieldSelector="spec.bogus=1"))[0] == 400
    assert (await api.get(PODS, labelSelector="a in (b"))[0] == 400
    _, everywhere = await api.get("/api/v1/pods", fieldSelector="metadata.namespace=team-a")
    assert len(everywhere["items"]) == 3
    assert int(everywhere["metadata"]["resourceVersion"]) > 0


async def test_limit_and_continue(api: Api) -> None:
    for i in range(5):
        await api.post(PODS, pod(f"p{i}", schedulingGates=[{"name": "hold"}]))
    _, first = await api.get(PODS, limit="2")
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    _, second = await api.get(PODS, limit="2", **{"continue": first["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in second["items"]] == ["p2", "p3"]
    _, last = await api.get(PODS, limit="2", **{"continue": second["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in last["items"]] == ["p4"]
    assert "continue" not in last["metadata"]


async def test_patch_types(api: Api) -> None:
    body = pod("p", labels={"a": "1", "b": "2"}, schedulingGates=[{"name": "hold"}])
    body["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    await api.post(PODS, body)

    status, merged = await api.patch(f"{PODS}/p", {"metadata": {"labels": {"a": None, "c": "3"}}},
                                     "application/merge-patch+json")
    assert status == 200 and merged["metadata"]["labels"] == {"b": "2", "c": "3"}

    # containers merge by name: the image (one of a pod's few mutable fields) changes, the rest stays
    smp = {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}
    status, strategic = await api.patch(f"{PODS}/p", smp, "application/strategic-merge-patch+json")
    assert status == 200
    container = strategic["spec"]["containers"][0]
    assert container["image"] == "busybox:2"
    assert container["env"] == [{"name": "X", "value": "1"}]
    # anything else of a pod's spec is immutable, as on a real API server
    env = {"spec": {"containers": [{"name": "main", "env": [{"name": "Y", "value": "2"}]}]}}
    status, err = await api.patch(f"{PODS}/p", env, "application/strategic-merge-patch+json")
    assert (status, err["reason"], err["details"]["causes"][0]["field"]) == (422, "Invalid", "spec")

    ops = [{"op": "replace", "path": "/metadata/labels/b", "value": "20"},
           {"op": "add", "path": "/metadata/annotations/note", "value": "hi"}]
    status, jp = await api.patch(f"{PODS}/p", ops, "application/json-patch+json")
    assert status == 200 and jp["metadata"]["labels"]["b"] == "20" and jp["metadata"]["annotations"]["note"] == "hi"
    status, err = await api.patch(f"{PODS}/p", [{"op": "test", "path": "/metadata/labels/b", "value": "x"}],
                                  "application/json-patch+json")
    assert status == 422

    stale = {"metadata": {"resourceVersion": "2", "labels": {"z": "1"}}}
    status, err = await api.patch(f"{PODS}/p", stale, "application/merge-patch+json")
    assert (status, err["reason"]) == (409, "Conflict")

    status, applied = await api.patch(
        f"{PODS}/q", "apiVersion: v1\nkind: Pod\nmetadata: {name: q, namespace: team-a}\nspec:\n  containers:\n"
        "  - {name: main, image: busybox}\n", "application/apply-patch+yaml", fieldManager="test")
    assert status == 201 or status == 200
    assert applied["metadata"]["name"] == "q"
    assert (await api.patch(f"{PODS}/q", {}, "text/plain"))[0] == 415
    assert (await api.patch(f"{PODS}/missing", {}, "application/merge-patch+json"))[0] == 404


async def test_status_subresource_separates_spec_and_status(api: Api) -> None:
    await api.post(PODS, pod("p", schedulingGates=[{"name": "hold"}]))
    _, current = await api.get(f"{PODS}/p")
    current["status"]["phase"] = "Running"
    _, main = await api.put(f"{PODS}/p", current)
    assert main["status"]["phase"] == "Pending"
    status, patched = await api.patch(f"{PODS}/p/status", {"status": {"message": "hello"}},
                                      "application/merge-patch+json")
    assert status == 200 and patched["status"]["message"] == "hello"
    status, log = await api.get(f"{PODS}/p/log")
    assert status == 200 and "team-a/p" in log


async def test_deletecollection_and_namespaces(api: Api) -> None:
    status, _ = await api.post("/api/v1/namespaces", {"metadata": {"name": "scratch"}})
    assert status == 201
    for i in range(3):
        await api.post("/api/v1/namespaces/scratch/pods",
                       pod(f"p{i}", namespace="scratch", labels={"i": str(i)}, schedulingGates=[{"name": "h"}]))
    status, deleted = await api.delete("/api/v1/namespaces/scratch/pods", labelSelector="i in (0,1)")
    assert status == 200 and len(deleted["items"]) == 2
    _, left = await api.get("/api/v1/namespaces/scratch/pods")
    assert [p["metadata"]["name"] for p in left["items"]] == ["p2"]
    await api.delete("/api/v1/namespaces/scratch")

    async def namespace_gone() -> bool:
        return (await api.get("/api/v1/namespaces/scratch"))[0] == 404

    from tests.kubesim.builders import eventually

    await eventually(namespace_gone)
    assert (await api.get("/api/v1/namespaces/scratch/pods/p2"))[0] == 404


async def test_leases_and_tables(api: Api) -> None:
    lease = {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    path = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"
    assert (await api.post(path, lease))[0] == 201
    _, got = await api.get(f"{path}/leader")
    got["spec"]["holderIdentity"] = "b"
    status, updated = await api.put(f"{path}/leader", got)
    assert status == 200 and updated["spec"]["holderIdentity"] == "b"
    _, node_leases = await api.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
    assert len(node_leases["items"]) == 6
    status, tbl = await api.call("GET", "/api/v1/nodes",
                                 headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert status == 200 and tbl["kind"] == "Table"
    assert [c["name"] for c in tbl["columnDefinitions"]][:2] == ["Name", "Status"]
    assert tbl["rows"][0]["cells"][:2] == ["east-a100-0", "Ready"]
