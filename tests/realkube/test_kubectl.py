"""The README's kubectl steps on the real control plane, with the kubectl built beside it: the server's
version parses, the nodes show their GPUs, labels and NVLink groups, and a GPU Job runs to Complete."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.builders.realkube import RealCluster, RealKube
from tests.kubesim.test_kubectl import JOB_YAML
from tests.realkube.conftest import NAMESPACE

pytestmark = pytest.mark.realkube



async def kubectl(real_kube: RealKube, real: RealCluster, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(real_kube.binaries.path("kubectl")), "--kubeconfig", str(real.admin_kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, text
    return text


async def test_kubectl_version_nodes_and_a_gpu_job(tmp_path: Path, real_kube: RealKube, real: RealCluster,
                                                   admin: object) -> None:
    version = await kubectl(real_kube, real, "version")
    assert "Server Version: v1.37.2" in version
    nodes = await kubectl(real_kube, real, "get", "nodes", "-L", "nvidia.com/gpu.product")
    a100 = next(line for line in nodes.splitlines() if line.startswith("east-a100-0"))
    assert a100.split()[1] == "Ready" and a100.split()[-1] == "a100"
    gpus = await kubectl(real_kube, real, "get", "node", "east-t4-0", "-o",
                         "jsonpath={.status.allocatable.nvidia\\.com/gpu}")
    assert gpus == "4"
    described = await kubectl(real_kube, real, "describe", "node", "east-a100-0")
    assert "muster.dev/nvlink-groups: 4,4" in described and "nvidia.com/gpu:NoSchedule" in described

    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML)
    assert "job.batch/demo created" in await kubectl(real_kube, real, "apply", "-f", str(manifest))
    await kubectl(real_kube, real, "wait", "-n", NAMESPACE, "--for=condition=complete", "job/demo", "--timeout=60s")
    pods = await kubectl(real_kube, real, "get", "pods", "-n", NAMESPACE, "-o", "wide")
    rows = [r.split() for r in pods.splitlines()[1:] if r.startswith("demo-")]
    assert len(rows) == 2 and all(r[2] == "Completed" and r[6].startswith("east-") for r in rows), pods
