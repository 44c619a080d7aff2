"""The Helm chart's objects as the real kube-apiserver sees them: a server-side dry run of everything the
chart renders (with the kube-native component), in a namespace that warns on the `restricted` Pod
Security Standard, without a single warning."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.builders.realkube import RealCluster, RealKube
from tests.contract.test_helm import render
from tests.realkube.test_kubectl import kubectl

pytestmark = pytest.mark.realkube

#: not muster-system: the shared control plane's bootstrap keeps the services' own accounts there
NAMESPACE = "muster-helm-check"


async def test_chart_passes_a_server_side_dry_run_under_restricted_pod_security(
        tmp_path: Path, real_kube: RealKube, real: RealCluster) -> None:
    objs = render("gateway.kubeJobs.enabled=true", "clusters[0].name=east", "clusters[1].name=west",
                  namespace=NAMESPACE)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}
    (tmp_path / "namespace.yaml").write_text(yaml.safe_dump(namespace))
    (tmp_path / "chart.yaml").write_text(yaml.safe_dump_all(objs))
    # the check can fail: a container that may escalate its privileges is warned about
    loose = copy.deepcopy(next(o for o in objs if o["kind"] == "Deployment"))
    loose["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    (tmp_path / "loose.yaml").write_text(yaml.safe_dump(loose))
    await kubectl(real_kube, real, "apply", "-f", str(tmp_path / "namespace.yaml"))
    try:
        warned = await kubectl(real_kube, real, "apply", "--server-side", "--dry-run=server", "-f",
                               str(tmp_path / "loose.yaml"))
        assert "would violate PodSecurity" in warned, warned
        # server-side apply: the control plane's bootstrap already holds Muster's ClusterRoles, made without
        # kubectl's last-applied annotation; a client-side apply would warn about that
        out = await kubectl(real_kube, real, "apply", "--server-side", "--force-conflicts", "--field-manager=helm",
                            "--dry-run=server", "-f", str(tmp_path / "chart.yaml"))
    finally:
        await kubectl(real_kube, real, "delete", "namespace", NAMESPACE, "--wait=false")
    assert "Warning" not in out, out  # e.g. "would violate PodSecurity restricted"
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(objs) and all(line.endswith("(server dry run)") for line in lines), out
