"""How each workload controller runs on this host beside a local control plane: its command line,
configuration file and environment, what must exist in the cluster before it starts, and the object
whose server-side dry-run create tells that it (CRDs and webhooks) is ready.

Every controller gets ports of its own (health probes, webhooks; metrics off), its own working and
temporary directory, leader election off (explicitly: JobSet, LWS and KubeRay default to on) and the
admin kubeconfig. The webhooks are served with certificates Muster makes (``pki.ensure_webhook_pki``):

- **JobSet** v0.10.1 and **LWS** v0.7.0 take a ``--config`` file: ``internalCertManagement.enable:
  false`` turns their cert-controller rotator off, ``webhook.{host,port,certDir}`` serve Muster's
  certificate on 127.0.0.1.
- **Trainer** v2.0.0 always runs the rotator, which (1) needs the Secret
  ``kubeflow-system/kubeflow-trainer-webhook-cert`` to exist, and keeps its content when the CA and
  certificate in it are valid, so Muster writes its own there (a CA of the trainer's alone, named
  ``kubeflow-trainer-ca`` as the rotator checks, and a certificate for
  ``kubeflow-trainer-controller-manager.kubeflow-system.svc`` and 127.0.0.1; the namespace is the
  pod's when Muster itself runs in a pod, as the trainer reads it); and (2) only starts the
  controllers once a ``tls.crt`` exists in the hard-coded ``/tmp/k8s-webhook-server/serving-certs``.
  The webhook server itself reads its certificate from ``$TMPDIR/k8s-webhook-server/serving-certs``
  (controller-runtime's default, which follows ``TMPDIR``), and the trainer runs with a ``TMPDIR`` of
  its own, so each trainer serves its own certificate. The hard-coded path is only checked for
  existence: Muster creates ``/tmp/k8s-webhook-server/serving-certs/tls.crt`` (a public certificate)
  when it is missing and never changes or deletes one that is there, so several trainers, and other
  programs that use that folder, do not collide. Its webhook port is ``--webhook-server-port``; it
  listens on every interface (v2.0.0 has no host setting).
- **KubeRay** v1.5.0 runs without its webhook, as its default deployment (``config/default``) does:
  the only one it has is an optional validating webhook for RayClusters (env ``ENABLE_WEBHOOKS=true``;
  Muster sets it to ``false``), and v1.5.0 serves it on controller-runtime's fixed default port 9443
  with no flag or setting to change it, so two clusters' operators on one host would collide.
  ``--use-kubernetes-proxy`` makes it reach Ray dashboards through the API server, as it must from
  outside the cluster.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from services.kubereal.pki import WebhookPki

KubeObject = dict[str, Any]
HOST = "127.0.0.1"
#: the folder cert-controller waits for, and controller-runtime's default under TMPDIR
WEBHOOK_CERTS = Path("k8s-webhook-server") / "serving-certs"
HARD_CODED_CERTS = Path("/tmp") / WEBHOOK_CERTS
#: Trainer's certificate rotator: the Secret it reads, the Service and CA names it checks certificates for
TRAINER_SECRET = "kubeflow-trainer-webhook-cert"
TRAINER_SERVICE = "kubeflow-trainer-controller-manager"
TRAINER_CA = "kubeflow-trainer-ca"
#: where a manager reads its namespace when it runs in a pod (else it takes its default)
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: where dry-run probes are created (every cluster has it)
PROBE_NAMESPACE = "default"


@dataclass(frozen=True)
class Site:
    """Where one controller runs: its binary, its folder in the state directory, its ports, the
    kubeconfig it uses and its webhook certificates (None when it serves no webhooks)."""

    binary: Path
    work_dir: Path
    kubeconfig: Path
    probe_port: int
    webhook_port: int
    pki: WebhookPki | None

    @property
    def tmp_dir(self) -> Path:
        return self.work_dir / "tmp"

    @property
    def probe_address(self) -> str:
        return f"{HOST}:{self.probe_port}"


def operator_namespace(default: str, namespace_file: Path = POD_NAMESPACE_FILE) -> str:
    """The namespace a manager takes as its own: its pod's, else ``default`` (as Trainer v2.0.0 decides)."""
    try:
        return namespace_file.read_text().strip() or default
    except OSError:
        return default


def trainer_namespace() -> str:
    return operator_namespace("kubeflow-system")


def webhook_identity(name: str) -> tuple[str, tuple[str, ...]]:
    """The name of controller ``name``'s webhook CA and the DNS names of its serving certificate (it is
    also valid for 127.0.0.1): Trainer's rotator checks both, the others take any."""
    if name == "trainer":
        return TRAINER_CA, ("localhost", f"{TRAINER_SERVICE}.{trainer_namespace()}.svc")
    return f"muster-{name}-webhook-ca", ("localhost",)


@dataclass(frozen=True)
class Launch:
    """What starting one controller takes: files to write, objects to apply first, and the process."""

    argv: list[str]
    env: dict[str, str]
    files: dict[Path, bytes] = field(default_factory=dict)
    #: written only when nothing is at the path (shared paths Muster must not change)
    if_missing: dict[Path, bytes] = field(default_factory=dict)
    objects: list[KubeObject] = field(default_factory=list)


def _env(site: Site, **extra: str) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(site.kubeconfig), "TMPDIR": str(site.tmp_dir), **extra}


def _webhooks_env(site: Site, on: bool) -> dict[str, str]:
    """The environment with ``ENABLE_WEBHOOKS`` set as Muster wants, whatever the caller's says."""
    return _env(site, ENABLE_WEBHOOKS="true" if on else "false")


def _certs(site: Site, folder: Path) -> dict[Path, bytes]:
    assert site.pki is not None
    return {folder / "tls.crt": site.pki.cert.read_bytes(), folder / "tls.key": site.pki.key.read_bytes()}


def _manager_config(api_version: str, site: Site, cert_dir: Path) -> bytes:
    """The Configuration file JobSet and LWS share the shape of."""
    return yaml.safe_dump({
        "apiVersion": api_version, "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": site.probe_address},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": HOST, "port": site.webhook_port, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
    }, sort_keys=False).encode()


def _config_managed(api_version: str) -> Callable[[Site], Launch]:
    def launch(site: Site) -> Launch:
        cert_dir = site.work_dir / "certs"
        config = site.work_dir / "config.yaml"
        return Launch(
            argv=[str(site.binary), f"--config={config}", "--leader-elect=false", "--metrics-bind-address=0",
                  f"--health-probe-bind-address={site.probe_address}"],
            env=_webhooks_env(site, True),  # LWS leaves its webhooks out with ENABLE_WEBHOOKS=false
            files={config: _manager_config(api_version, site, cert_dir), **_certs(site, cert_dir)},
        )
    return launch


def kuberay(site: Site) -> Launch:
    return Launch(
        argv=[str(site.binary), "--enable-leader-election=false", "--use-kubernetes-proxy", "--metrics-addr=0",
              f"--health-probe-bind-address={site.probe_address}", "--log-stdout-encoder=console"],
        env=_webhooks_env(site, False),
    )


def trainer(site: Site) -> Launch:
    assert site.pki is not None
    namespace = trainer_namespace()
    secret = {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": TRAINER_SECRET, "namespace": namespace},
        "data": {name: _b64(path.read_bytes()) for name, path in (
            ("ca.crt", site.pki.ca_cert), ("ca.key", site.pki.ca_key),
            ("tls.crt", site.pki.cert), ("tls.key", site.pki.key))},
    }
    return Launch(
        argv=[str(site.binary), "--leader-elect=false", "--metrics-bind-address=0",
              f"--health-probe-bind-address={site.probe_address}", f"--webhook-server-port={site.webhook_port}"],
        env=_env(site),
        files=_certs(site, site.tmp_dir / WEBHOOK_CERTS),
        if_missing={HARD_CODED_CERTS / "tls.crt": site.pki.cert.read_bytes()},
        objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, secret],
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


LAUNCHERS: dict[str, Callable[[Site], Launch]] = {
    "jobset": _config_managed("config.jobset.x-k8s.io/v1alpha1"),
    "lws": _config_managed("config.lws.x-k8s.io/v1alpha1"),
    "kuberay": kuberay,
    "trainer": trainer,
}

# -- readiness probes: minimal objects a server-side dry-run create sends through the webhooks --------

_CONTAINER = {"name": "main", "image": "busybox"}
_POD = {"spec": {"containers": [_CONTAINER], "restartPolicy": "Never"}}


def _meta(name: str) -> dict[str, str]:
    return {"name": name, "namespace": PROBE_NAMESPACE}


PROBES: dict[str, KubeObject] = {
    "jobset": {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta("muster-ready-probe"),
        "spec": {"replicatedJobs": [{"name": "main", "replicas": 1, "template": {"spec": {"template": _POD}}}]},
    },
    "lws": {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta("muster-ready-probe"),
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [_CONTAINER]}}}},
    },
    "kuberay": {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta("muster-ready-probe"),
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}},
    },
    "trainer": {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta("muster-ready-probe"),
        "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"}},
    },
}
