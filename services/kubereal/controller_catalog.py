"""The workload controllers a local control plane can run beside Kubernetes' own: what each one is
built from and which of its module's manifests Muster installs.

Each controller is pinned by a small Go module under ``gomodules/controllers/<name>/`` (a
``go.mod`` that requires the controller's module at one version and names its manager as a ``tool``,
and the ``go.sum`` of that build; made with ``go mod tidy``). Its ``go`` line is the controller's own
(1.24.0), so the binary gets the GODEBUG defaults of the controller's own builds. CRDs, webhook
configurations and Trainer's runtimes are read from the same module at the same version, copied out
of Go's module cache when the controller is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from services.kubereal.build import GO_MODULES_ROOT

CONTROLLERS_DIR = GO_MODULES_ROOT / "controllers"


@dataclass(frozen=True)
class ControllerSpec:
    """One controller: its Go module and manager package, and the manifests Muster takes from it.

    Paths are relative to the module's root. ``webhooks`` is a kustomize directory whose
    ``kustomization.yaml`` lists the webhook configurations and the JSON patches applied to them;
    ``name_prefix`` is the prefix the controller's own deployment gives their names.
    """

    name: str
    module: str
    version: str
    package: str
    crds: tuple[str, ...]
    webhooks: str | None = None
    name_prefix: str = ""
    #: ClusterTrainingRuntimes and the like: applied once the controller (and its webhook) is ready
    extras: str | None = None
    #: controllers that must run too (their CRDs are installed first)
    needs: tuple[str, ...] = ()
    #: Go variable set to ``version`` at link time, when the manager logs one
    version_var: str | None = None

    @property
    def go_module_dir(self) -> Path:
        return CONTROLLERS_DIR / self.name

    @property
    def manifest_dirs(self) -> tuple[str, ...]:
        """What the build copies out of the module: the CRD files' folders, the webhook and extras folders."""
        dirs = {str(Path(c).parent) for c in self.crds}
        dirs |= {d for d in (self.webhooks, self.extras) if d}
        return tuple(sorted(dirs))


JOBSET = ControllerSpec(
    name="jobset", module="sigs.k8s.io/jobset", version="v0.10.1", package="sigs.k8s.io/jobset",
    crds=("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
    webhooks="config/components/webhook", name_prefix="jobset-",
    version_var="sigs.k8s.io/jobset/pkg/version.GitVersion",
)
LWS = ControllerSpec(
    name="lws", module="sigs.k8s.io/lws", version="v0.7.0", package="sigs.k8s.io/lws/cmd",
    crds=("config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
    webhooks="config/webhook", name_prefix="lws-",
    version_var="sigs.k8s.io/lws/pkg/version.GitVersion",
)
KUBERAY = ControllerSpec(
    name="kuberay", module="github.com/ray-project/kuberay/ray-operator", version="v1.5.0",
    package="github.com/ray-project/kuberay/ray-operator",
    crds=tuple(f"config/crd/bases/ray.io_{kind}.yaml" for kind in ("rayclusters", "rayjobs", "rayservices")),
)
TRAINER = ControllerSpec(
    name="trainer", module="github.com/kubeflow/trainer/v2", version="v2.0.0",
    package="github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
    crds=tuple(f"manifests/base/crds/trainer.kubeflow.org_{kind}.yaml"
               for kind in ("clustertrainingruntimes", "trainingruntimes", "trainjobs")),
    webhooks="manifests/base/webhook", extras="manifests/base/runtimes", needs=("jobset",),
)

#: in the order they start: a controller's ``needs`` come before it
SPECS: dict[str, ControllerSpec] = {s.name: s for s in (JOBSET, LWS, KUBERAY, TRAINER)}
ALL = "all"


def resolve(names: Iterable[str]) -> tuple[str, ...]:
    """The controllers to run for ``names`` (``all`` is every one), with what they need, in start order."""
    wanted: set[str] = set()
    pending = [n.strip() for n in names if n.strip()]
    while pending:
        name = pending.pop()
        if name == ALL:
            pending += list(SPECS)
            continue
        if name not in SPECS:
            raise ValueError(f"unknown controller {name!r}: choose from {', '.join(SPECS)} or {ALL}")
        if name not in wanted:
            wanted.add(name)
            pending += list(SPECS[name].needs)
    return tuple(n for n in SPECS if n in wanted)


def parse(option: str) -> tuple[str, ...]:
    """A ``--controllers`` value, e.g. ``jobset,lws`` or ``all``; empty is none."""
    return resolve(option.split(",")) if option.strip() else ()

