"""Building the control plane's binaries from their Go modules, once, into ``~/.cache/muster/k8s/<key>``.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from ``k8s.io/kubernetes``,
etcd from the etcd server module Kubernetes pins, all through the Go module at the root of ``gomodules/``
(pinned by its ``go.sum``). KWOK, which plays the kubelets of the fake GPU nodes, is installed at
its released version, and the stage files Muster uses from its module are copied beside it. The
cache key holds the versions and a digest of the Go module's files, so a changed pin builds anew and
a second call with nothing changed does nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "v1.37.2"
KWOK_VERSION = "v0.8.0"
KWOK_MODULE = "sigs.k8s.io/kwok"
#: KWOK's own stages Muster runs with: destination under ``stages/`` -> path inside KWOK's module.
#: Muster's own pod-complete stages (``services/kubereal/stages``) take the place of KWOK's.
KWOK_STAGES = {
    "common/node-initialize.yaml": "kustomize/stage/node/fast/node-initialize.yaml",
    "common/node-heartbeat-with-lease.yaml": "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "realistic/pod-create.yaml": "kustomize/stage/pod/general/pod-create.yaml",
    "realistic/pod-init-container-running.yaml": "kustomize/stage/pod/general/pod-init-container-running.yaml",
    "realistic/pod-init-container-completed.yaml": "kustomize/stage/pod/general/pod-init-container-completed.yaml",
    "realistic/pod-ready.yaml": "kustomize/stage/pod/general/pod-ready.yaml",
    "fast/pod-ready.yaml": "kustomize/stage/pod/fast/pod-ready.yaml",
    # both profiles: a deleted pod goes after a random part of its grace period, as a real one would
    "common/pod-delete.yaml": "kustomize/stage/pod/general/pod-delete.yaml",
}
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
BINARIES = ("etcd", *KUBE_COMMANDS, "kwok")
#: the Go modules Muster builds from (``gomodules/README.md``); the Kubernetes module is at its root
GO_MODULES_ROOT = Path(__file__).resolve().parents[2] / "gomodules"
GO_MODULE_DIR = GO_MODULES_ROOT
CACHE_ENV = "MUSTER_CACHE_DIR"
FALLBACK_GO = "/usr/local/go/bin/go"


class BuildError(RuntimeError):
    """The control plane could not be built (no Go toolchain, a failed build, no module source)."""


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(CACHE_ENV) or Path.home() / ".cache" / "muster")


def module_digest(module_dir: Path = GO_MODULE_DIR) -> str:
    """A digest of what decides the build: go.mod, go.sum and the etcd main."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "cmd/etcd/main.go"):
        path = module_dir / name
        if not path.exists():
            raise BuildError(f"{path} is missing: `muster k8s build` runs from a checkout of the Muster repository")
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def build_key(module_dir: Path = GO_MODULE_DIR) -> str:
    return f"{K8S_VERSION}-kwok-{KWOK_VERSION}-{module_digest(module_dir)}"


@dataclass(frozen=True)
class Binaries:
    """A finished build: ``bin/`` with the six programs, ``stages/`` with KWOK's stage files by profile."""

    root: Path

    def path(self, name: str) -> Path:
        return self.root / "bin" / name

    def kwok_stages(self, profile: str) -> list[Path]:
        """KWOK's stage files for ``profile`` ("fast": pods start at once; "realistic": within seconds)."""
        stages = self.root / "stages"
        return sorted([*(stages / "common").glob("*.yaml"), *(stages / profile).glob("*.yaml")])

    @property
    def complete(self) -> bool:
        return (self.root / "build.json").exists() and all(self.path(b).exists() for b in BINARIES)


def cached(environ: dict[str, str] | None = None, module_dir: Path = GO_MODULE_DIR) -> Binaries:
    """Where the build for the current pins lives (it may not be built yet)."""
    return Binaries(cache_root(environ) / "k8s" / build_key(module_dir))


def _version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}", f"-X {pkg}.gitMinor={minor}",
                  f"-X {pkg}.gitTreeState=clean", f"-X {pkg}.buildDate=1970-01-01T00:00:00Z"]
    return " ".join(flags)


def run_go(args: list[str], cwd: Path, env: dict[str, str], log: Callable[[str], None]) -> str:
    """``go <args>`` in ``cwd``; its standard output, or ``BuildError`` with the end of its errors."""
    log("go " + " ".join(args))
    done = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"`go {' '.join(args[:2])} ...` failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def go_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a pinned build: the local Go toolchain only, modules as ``go.sum`` pins them."""
    base = dict(os.environ if environ is None else environ)
    if shutil.which("go", path=base.get("PATH")) is None and Path(FALLBACK_GO).exists():
        base["PATH"] = f"{Path(FALLBACK_GO).parent}:{base.get('PATH', '')}"  # Go's own install location
    if shutil.which("go", path=base.get("PATH")) is None:
        raise BuildError("the Go toolchain (1.26 or newer) is needed to build the control plane: install `go`, "
                         "or set MUSTER_SKIP_REAL_KUBE=1 to leave out the real control-plane tier")
    return {**base, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly -buildvcs=false"}


def build(log: Callable[[str], None] = print, *, force: bool = False,
          environ: dict[str, str] | None = None, module_dir: Path = GO_MODULE_DIR) -> Binaries:
    """The binaries for the current pins, building them first when the cache has none."""
    target = cached(environ, module_dir)
    if target.complete and not force:
        return target
    env = go_environment(environ)
    partial = target.root.with_name(target.root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "bin").mkdir(parents=True)
    started = time.monotonic()
    packages = ["./cmd/etcd", *(f"k8s.io/kubernetes/cmd/{c}" for c in KUBE_COMMANDS)]
    run_go(["build", "-trimpath", "-ldflags", _version_ldflags(K8S_VERSION), "-o", str(partial / "bin") + "/",
            *packages], module_dir, env, log)
    outside = {k: v for k, v in env.items() if k != "GOFLAGS"}
    run_go(["install", "-trimpath", f"{KWOK_MODULE}/cmd/kwok@{KWOK_VERSION}"], partial,
           {**outside, "GOBIN": str(partial / "bin")}, log)
    info = json.loads(run_go(["mod", "download", "-json", f"{KWOK_MODULE}@{KWOK_VERSION}"], partial, outside, log))
    kwok_dir = Path(info["Dir"])
    for dest, source in KWOK_STAGES.items():
        (partial / "stages" / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kwok_dir / source, partial / "stages" / dest)
    (partial / "build.json").write_text(json.dumps({
        "kubernetes": K8S_VERSION, "kwok": KWOK_VERSION, "go_module_digest": module_digest(module_dir),
        "seconds": round(time.monotonic() - started, 1),
    }, indent=2))
    shutil.rmtree(target.root, ignore_errors=True)
    partial.rename(target.root)
    return target
