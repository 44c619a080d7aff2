"""cluster-autoscaler's ``ProvisioningRequest`` API (``autoscaling.x-k8s.io/v1``) on a local control plane: its
CRD, taken from the autoscaler's Go module at the version Kueue v0.17.0 pins (downloaded once through the Go
module proxy into ``~/.cache/muster/crds/``), installed by server-side apply and waited on until Established.

Only the API is installed: nothing here answers the requests. On a local plane the cloud is played by
``services.kubereal.fake_cloud``; on a real cluster, by cluster-autoscaler.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from services.kubereal.admin import AdminApi
from services.kubereal.build import BuildError, cache_root, go_environment, run_go
from services.kubereal.controlplane import ControlPlane
from services.kubereal.manifests import load

MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
VERSION = "v0.0.0-20240830133931-adfbe7e45277"
CRD_FILE = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
CRD_NAME = "provisioningrequests.autoscaling.x-k8s.io"


def provisioning_crd(log: Callable[[str], None] = print, environ: dict[str, str] | None = None) -> Path:
    """The CRD's file, downloaded from the module first when the cache has none (``BuildError`` when it cannot)."""
    target = cache_root(environ) / "crds" / VERSION / Path(CRD_FILE).name
    if target.exists():
        return target
    env = {k: v for k, v in go_environment(environ).items() if k != "GOFLAGS"}
    work = target.parent / ".download"
    work.mkdir(parents=True, exist_ok=True)
    try:
        info = json.loads(run_go(["mod", "download", "-json", f"{MODULE}@{VERSION}"], work, env, log))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    source = Path(info.get("Dir", "")) / CRD_FILE
    if not source.exists():
        raise BuildError(f"{MODULE}@{VERSION} has no {CRD_FILE}")
    partial = target.with_suffix(".partial")
    shutil.copyfile(source, partial)
    partial.rename(target)
    return target


def install_provisioning_api(plane: ControlPlane, log: Callable[[str], None] = print,
                             timeout_s: float = 60.0) -> None:
    """Apply the CRD to ``plane`` and wait until the API serves it."""
    path = provisioning_crd(log)
    with AdminApi(plane.url, plane.admin_token, plane.ca_file) as api:
        for crd in load(path):
            api.apply(crd)
        if api.wait_established([CRD_NAME], timeout_s) is not None:
            raise BuildError(f"CRD {CRD_NAME} not Established after {timeout_s:.0f}s")
