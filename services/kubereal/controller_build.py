"""Building the workload controllers (``controller_catalog``) once each, into the cache beside the
control plane: ``~/.cache/muster/k8s/controllers/<name>-<version>-<digest>/``.

A build holds ``bin/<name>`` (the manager), ``manifests/`` (the folders of the controller's module that
Muster installs from: CRDs, webhook configurations, runtimes, copied from Go's module cache at the
pinned version) and ``build.json``. The digest covers the controller's ``go.mod`` and ``go.sum`` and
what is copied, so a changed pin builds anew and a second call with nothing changed does nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from services.kubereal.build import BuildError, cache_root, go_environment, run_go
from services.kubereal.controller_catalog import SPECS, ControllerSpec


def controller_digest(spec: ControllerSpec) -> str:
    """A digest of what decides the build: the pinning module's go.mod and go.sum, the manager package
    and the module folders copied beside it."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        path = spec.go_module_dir / name
        if not path.exists():
            raise BuildError(f"{path} is missing: `muster k8s build` runs from a checkout of the Muster repository")
        digest.update(name.encode() + b"\0" + path.read_bytes())
    digest.update("\0".join((spec.package, *spec.manifest_dirs)).encode())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class ControllerBuild:
    """One finished (or expected) build of a controller."""

    spec: ControllerSpec
    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / self.spec.name

    def manifest(self, relative: str) -> Path:
        """A file or folder of the controller's module, as copied into the build."""
        return self.root / "manifests" / relative

    @property
    def complete(self) -> bool:
        return (self.root / "build.json").exists() and self.binary.exists()

    @property
    def seconds(self) -> float | None:
        """How long the build took, when it was made."""
        try:
            return float(json.loads((self.root / "build.json").read_text())["seconds"])
        except (OSError, ValueError, KeyError):
            return None


def cached_controller(spec: ControllerSpec, environ: dict[str, str] | None = None) -> ControllerBuild:
    """Where the build of ``spec`` at its pins lives (it may not be built yet)."""
    key = f"{spec.name}-{spec.version}-{controller_digest(spec)}"
    return ControllerBuild(spec, cache_root(environ) / "k8s" / "controllers" / key)


def _ldflags(spec: ControllerSpec) -> str:
    flags = ["-s", "-w"]
    if spec.version_var:
        flags.append(f"-X {spec.version_var}={spec.version}")
    return " ".join(flags)


def build_controller(spec: ControllerSpec, log: Callable[[str], None] = print, *, force: bool = False,
                     environ: dict[str, str] | None = None) -> tuple[ControllerBuild, bool]:
    """The build of ``spec``, made first when the cache has none; and whether it was made now."""
    target = cached_controller(spec, environ)
    if target.complete and not force:
        return target, False
    env = {**go_environment(environ), "CGO_ENABLED": "0"}
    partial = target.root.with_name(target.root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "bin").mkdir(parents=True)
    started = time.monotonic()
    try:
        run_go(["build", "-trimpath", "-ldflags", _ldflags(spec), "-o", str(partial / "bin" / spec.name),
                spec.package], spec.go_module_dir, env, log)
        info = json.loads(run_go(["list", "-m", "-json", spec.module], spec.go_module_dir, env, log))
        if info.get("Version") != spec.version or not info.get("Dir"):
            raise BuildError(f"{spec.go_module_dir / 'go.mod'} resolves {spec.module} to {info.get('Version')}, "
                             f"not {spec.version}: pin it with `go get {spec.module}@{spec.version}` there")
        source = Path(info["Dir"])
        for folder in spec.manifest_dirs:
            shutil.copytree(source / folder, partial / "manifests" / folder)
        for path in (partial / "manifests").rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's files are read-only
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / "build.json").write_text(json.dumps({
        "controller": spec.name, "module": spec.module, "version": spec.version,
        "go_module_digest": controller_digest(spec), "seconds": round(time.monotonic() - started, 1),
    }, indent=2))
    if target.root.exists():
        shutil.rmtree(target.root)
    partial.rename(target.root)
    return target, True


def build_controllers(names: Iterable[str], log: Callable[[str], None] = print, *, force: bool = False,
                      environ: dict[str, str] | None = None,
                      done: Callable[[ControllerBuild, bool], None] | None = None) -> dict[str, ControllerBuild]:
    """Each named controller's build (see ``controller_catalog.resolve`` for the names), made when missing;
    ``done`` hears of each as it finishes, with whether it was built now."""
    builds: dict[str, ControllerBuild] = {}
    for name in names:
        build, made = build_controller(SPECS[name], log, force=force, environ=environ)
        builds[name] = build
        if done is not None:
            done(build, made)
    return builds
