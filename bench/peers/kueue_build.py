"""Kueue's scheduler performance test built from its Go module, once, into
``~/.cache/muster/peers/kueue-<version>-<digest>/``, and run as Kueue's ``make run-performance-scheduler`` runs it.

The module ``gomodules/peers/kueue`` pins ``sigs.k8s.io/kueue`` (and everything it needs) by its go.mod and
go.sum. A build holds ``bin/runner`` and ``bin/minimalkueue`` (as Kueue's Makefile builds them), ``bin/checker.test``
(its checker, ``go test -c``), and from the module: ``crds/`` (``config/components/crd/bases``) and ``configs/``
(``test/performance/scheduler/configs``: the generator configs and the range specs its CI enforces).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.kubereal.build import GO_MODULES_ROOT, BuildError, cache_root, go_environment, run_go

MODULE = "sigs.k8s.io/kueue"
VERSION = "v0.17.0"
GO_MODULE_DIR = GO_MODULES_ROOT / "peers" / "kueue"
SCHEDULER = f"{MODULE}/test/performance/scheduler"
#: what its Makefile passes besides the paths (SCALABILITY_EXTRA_ARGS and SCALABILITY_SCRAPE_ARGS by default)
MAKE_ARGS = ("--withLogs=true", "--logToFile=true", "--metricsScrapeInterval=5s")
#: what its Makefile adds per scenario (``run-tas-performance-scheduler`` for ``configs/tas``)
SCENARIO_ARGS: dict[str, tuple[str, ...]] = {"baseline": (), "tas": ("--enableTAS=true", "--timeout=20m")}


@dataclass(frozen=True)
class KueueBuild:
    root: Path

    def binary(self, name: str) -> Path:
        return self.root / "bin" / name

    @property
    def crds(self) -> Path:
        return self.root / "crds"

    def config(self, scenario: str, name: str) -> Path:
        """``configs/<scenario>/<name>`` of Kueue's test, e.g. ``baseline``, ``generator.yaml``."""
        return self.root / "configs" / scenario / name

    @property
    def complete(self) -> bool:
        return (self.root / "build.json").exists()

    @property
    def seconds(self) -> float | None:
        try:
            return float(json.loads((self.root / "build.json").read_text())["seconds"])
        except (OSError, ValueError, KeyError):
            return None


def cached(environ: dict[str, str] | None = None) -> KueueBuild:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update(name.encode() + b"\0" + (GO_MODULE_DIR / name).read_bytes())
    return KueueBuild(cache_root(environ) / "peers" / f"kueue-{VERSION}-{digest.hexdigest()[:12]}")


def build(log: Callable[[str], None] = print, *, environ: dict[str, str] | None = None) -> tuple[KueueBuild, bool]:
    """The build, made first when the cache has none; and whether it was made now."""
    target = cached(environ)
    if target.complete:
        return target, False
    env = {**go_environment(environ), "CGO_ENABLED": "0"}
    partial = target.root.with_name(target.root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "bin").mkdir(parents=True)
    started = time.monotonic()
    try:
        for name in ("runner", "minimalkueue"):
            run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial / "bin" / name),
                    f"{SCHEDULER}/{name}"], GO_MODULE_DIR, env, log)
        run_go(["test", "-c", "-trimpath", "-o", str(partial / "bin" / "checker.test"), f"{SCHEDULER}/checker"],
               GO_MODULE_DIR, env, log)
        info = json.loads(run_go(["list", "-m", "-json", MODULE], GO_MODULE_DIR, env, log))
        if info.get("Version") != VERSION or not info.get("Dir"):
            raise BuildError(f"{GO_MODULE_DIR / 'go.mod'} resolves {MODULE} to {info.get('Version')}, not {VERSION}")
        source = Path(info["Dir"])
        shutil.copytree(source / "config" / "components" / "crd" / "bases", partial / "crds")
        shutil.copytree(source / "test" / "performance" / "scheduler" / "configs", partial / "configs")
        for path in partial.rglob("*"):
            if path.parent.name != "bin":
                path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's files are read-only
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / "build.json").write_text(json.dumps(
        {"module": MODULE, "version": VERSION, "seconds": round(time.monotonic() - started, 1)}, indent=2))
    if target.root.exists():
        shutil.rmtree(target.root)
    partial.rename(target.root)
    return target, True


@dataclass(frozen=True)
class KueueRun:
    out: Path  # the runner's artifacts: summary.yaml, minimalkueue.stats.yaml, cqStates.csv, wlStates.csv, logs
    seconds: float  # the runner's own wall time (envtest start and stop included)
    returncode: int
    checks: dict[str, bool]  # the checker's subtests -> passed
    checker_output: str

    @property
    def summary(self) -> Path:
        return self.out / "summary.yaml"

    @property
    def cmd_stats(self) -> Path:
        return self.out / "minimalkueue.stats.yaml"


def run(kueue: KueueBuild, assets: Path, generator: Path, rangespec: Path, out: Path, *,
        extra: tuple[str, ...] = (), timeout_s: float = 1800.0) -> KueueRun:
    """Kueue's runner with minimalkueue on envtest (``KUBEBUILDER_ASSETS=assets``: etcd, kube-apiserver,
    kubectl) and its Makefile's ``extra`` arguments for the scenario, then its checker against ``rangespec``; the
    runner's own log goes to ``out/runner.log``."""
    out.mkdir(parents=True, exist_ok=True)
    # PROJECT_DIR: Kueue's test helpers look for the project's folder from it at start (its Makefile sets it)
    env = {**os.environ, "KUBEBUILDER_ASSETS": str(assets), "PROJECT_DIR": str(kueue.root / "Makefile")}
    argv = [str(kueue.binary("runner")), f"--o={out}", f"--crds={kueue.crds}", f"--generatorConfig={generator}",
            f"--minimalKueue={kueue.binary('minimalkueue')}", *extra, *MAKE_ARGS]
    started = time.monotonic()
    with (out / "runner.log").open("wb") as log_file:
        done = subprocess.run(argv, env=env, cwd=out, stdout=log_file, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False)
    seconds = time.monotonic() - started
    checks: dict[str, bool] = {}
    output = ""
    if done.returncode == 0 and (out / "summary.yaml").exists():
        checked = subprocess.run([str(kueue.binary("checker.test")), "-test.v", f"--summary={out / 'summary.yaml'}",
                                  f"--cmdStats={out / 'minimalkueue.stats.yaml'}", f"--range={rangespec}"],
                                 env=env, cwd=out, capture_output=True, text=True, check=False, timeout=120)
        output = checked.stdout + checked.stderr
        checks = checker_results(output)
    return KueueRun(out, seconds, done.returncode, checks, output)


_RESULT = re.compile(r"^\s*--- (PASS|FAIL): (\S+)", re.MULTILINE)


def checker_results(output: str) -> dict[str, bool]:
    """The leaf subtests of ``go test -v`` output (``TestScalability/WorkloadClasses/small``) -> passed."""
    results = {name: verdict == "PASS" for verdict, name in _RESULT.findall(output)}
    return {name: ok for name, ok in results.items() if not any(o.startswith(name + "/") for o in results)}
