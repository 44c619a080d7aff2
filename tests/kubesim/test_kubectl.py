"""The real kubectl against a served KubeSim: nodes with GPUs, apply a Job, watch it run and complete."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from services.kubesim import KubeSim

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

JOB_YAML = """\
apiVersion: batch/v1
kind: Job
metadata: {name: demo, namespace: team-a}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    metadata:
      annotations: {kubesim.muster.dev/duration-seconds: "1.5"}
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: "4"}}}
"""


async def _kubectl(url: str, *args: str) -> str:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--server", url, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, text
    return text


async def test_kubectl_nodes_apply_and_watch(tmp_path: Path, sim: KubeSim) -> None:
    assert sim.url is not None
    url = sim.url
    nodes = await _kubectl(url, "get", "nodes", "-L", "nvidia.com/gpu.product")
    lines = nodes.splitlines()
    assert "GPUS" in lines[0] and "GPU.PRODUCT" in lines[0]
    a100 = next(line for line in lines if line.startswith("east-a100-0"))
    assert a100.split()[1] == "Ready" and "8" in a100.split() and "a100" in a100.split()
    gpus = await _kubectl(url, "get", "node", "east-t4-0", "-o", "jsonpath={.status.allocatable.nvidia\\.com/gpu}")
    assert gpus == "4"
    described = await _kubectl(url, "describe", "node", "east-a100-0")
    assert "muster.dev/nvlink-groups: 4,4" in described and "nvidia.com/gpu:NoSchedule" in described

    assert KUBECTL is not None
    watcher = await asyncio.create_subprocess_exec(
        KUBECTL, "--server", url, "get", "pods", "-n", "team-a", "-w",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML)
    try:
        await asyncio.sleep(0.5)
        assert "job.batch/demo created" in await _kubectl(url, "apply", "-f", str(manifest))

        async def pods_in(state: str) -> str:
            for _ in range(100):
                out = await _kubectl(url, "get", "pods", "-n", "team-a")
                rows = [r for r in out.splitlines()[1:] if r.startswith("demo-")]
                if len(rows) == 2 and all(r.split()[2] == state for r in rows):
                    return out
                await asyncio.sleep(0.05)
            raise AssertionError(f"pods never reached {state}: {out}")

        await pods_in("Running")
        await pods_in("Completed")
        jobs = await _kubectl(url, "get", "jobs", "-n", "team-a")
        assert "Complete" in jobs and "2/2" in jobs
        assert "unchanged" in await _kubectl(url, "apply", "-f", str(manifest))
        assert "patched" in await _kubectl(url, "patch", "job", "demo", "-n", "team-a", "-p",
                                           '{"metadata":{"labels":{"team":"a"}}}')
        assert "deleted" in await _kubectl(url, "delete", "job", "demo", "-n", "team-a")
        await asyncio.sleep(0.3)
    finally:
        watcher.terminate()
        out, _ = await watcher.communicate()
    watched = out.decode()
    for state in ("Pending", "Running", "Completed"):
        assert state in watched, watched
