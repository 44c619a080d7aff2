"""The simulated DCGM exporter (kubesim's nodes and the KWOK nodes have no GPU) and how the node watcher is
pointed at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas.config import MusterConfig
from services.kubesim.dcgm_exporter import SIMULATED_UTIL, exposition
from services.node_watcher.gpu_metrics import pod_utilisation
from services.runtime.options import ClusterAccess
from services.runtime.supervise import service_children


def pod(name: str, gpus: int, *, phase: str = "Running", util: str | None = None) -> dict[str, Any]:
    annotations = {SIMULATED_UTIL: util} if util is not None else {}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"metadata": {"name": name, "namespace": "team-a", "uid": f"u-{name}", "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": limits}}]},
            "status": {"phase": phase}}


def test_each_gpu_of_a_running_pod_reads_its_simulated_utilisation() -> None:
    text = exposition([pod("busy", 2, util="60"), pod("quiet", 1), pod("cpu", 0, util="90"),
                       pod("waiting", 1, phase="Pending", util="50"), pod("odd", 1, util="lots")])
    assert text.count("DCGM_FI_DEV_GPU_UTIL{") == 4  # 2 + 1 + 1: no sample for a CPU pod or a pod not running
    assert pod_utilisation(text) == {("team-a", "busy"): 60.0, ("team-a", "quiet"): 0.0, ("team-a", "odd"): 0.0}


def test_the_node_watcher_of_a_cluster_with_gpu_metrics_is_told_where(tmp_path: Path) -> None:
    cfg = MusterConfig.model_validate({"clusters": [{"name": "east", "node_groups": []}]})
    access = {"east": ClusterAccess("http://127.0.0.1:1", gpu_metrics="http://127.0.0.1:1/kubesim/dcgm-exporter/metrics")}
    children = {c.name: c for c in service_children(cfg, tmp_path, "127.0.0.1:9092", access, tmp_path / "c.yaml", 1)}
    assert children["node-watcher/east"].env["MUSTER_GPU_METRICS_URLS"].endswith("/kubesim/dcgm-exporter/metrics")
    assert "MUSTER_GPU_METRICS_URLS" not in children["dispatcher/east"].env
