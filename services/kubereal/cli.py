"""``muster k8s``: build the real control plane once, and run it in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import click

from services.kubereal.build import BuildError, build
from services.kubereal.controller_build import ControllerBuild, build_controllers
from services.kubereal.controller_catalog import SPECS
from services.kubereal.controller_catalog import parse as parse_controllers
from services.kubereal.controllers import Controllers
from services.kubereal.controlplane import PROFILES, ControlPlane, ControlPlaneError
from services.runtime.supervise import stop_on_signals
from services.spec.cluster_file import load_cluster_file


def _step(message: str) -> None:
    click.echo(click.style("» ", fg="cyan") + message, err=True)


@click.group("k8s")
def k8s() -> None:
    """A real Kubernetes control plane (etcd, kube-apiserver, controllers, scheduler, KWOK nodes)."""


def _controllers_option(value: str) -> tuple[str, ...]:
    try:
        return parse_controllers(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--controllers") from exc


CONTROLLERS_HELP = (f"workload controllers to build and run too, comma-separated: {', '.join(SPECS)} or all "
                    f"({', '.join(f'{s.name} {s.version}' for s in SPECS.values())}; trainer brings jobset)")


def _report(build: ControllerBuild, made: bool) -> None:
    spec = build.spec
    took = f"built in {build.seconds:.0f} s" if made and build.seconds is not None else "cached"
    _step(f"{spec.name} {spec.version}: {took} ({build.binary})")


def _build_controllers(names: tuple[str, ...], force: bool = False) -> dict[str, ControllerBuild]:
    try:
        return build_controllers(names, _step, force=force, done=_report)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc


@k8s.command("build")
@click.option("--force", is_flag=True, help="build again even when the cache has this version")
@click.option("--controllers", "controllers", default="", metavar="NAMES", help=CONTROLLERS_HELP)
def build_command(force: bool, controllers: str) -> None:
    """Build the binaries from their Go modules into ~/.cache/muster/k8s (once; minutes on 2 cores)."""
    names = _controllers_option(controllers)
    started = time.monotonic()
    try:
        binaries = build(_step, force=force)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    _step(f"binaries in {binaries.root / 'bin'} ({time.monotonic() - started:.0f}s)")
    _build_controllers(names, force)
    click.echo(str(binaries.root))


async def _serve(plane: ControlPlane, cluster_file: Path | None, controllers: Controllers | None) -> None:
    from services.kubereal.bootstrap import bootstrap

    cluster = None
    if cluster_file is not None:
        cfg = load_cluster_file(cluster_file)
        if len(cfg.clusters) != 1:
            names = ", ".join(c.name for c in cfg.clusters)
            _step(f"the cluster file has {len(cfg.clusters)} clusters ({names}); registering the first")
        cluster = cfg.clusters[0] if cfg.clusters else None
    await asyncio.to_thread(plane.start)
    try:
        done = await bootstrap(plane, cluster)
        if controllers is not None:
            _step(f"starting {', '.join(controllers.names)} (CRDs, webhooks, managers)")
            await asyncio.to_thread(controllers.start)
        click.echo("")
        click.echo(click.style("Kubernetes is up.", bold=True))
        click.echo(f"  API server           {plane.url}")
        click.echo(f"  admin kubeconfig     {plane.admin_kubeconfig}")
        click.echo(f"  kubectl              {plane.binaries.path('kubectl')} --kubeconfig {plane.admin_kubeconfig}")
        for service, path in done.kubeconfigs.items():
            click.echo(f"  {service + ' kubeconfig':20} {path}")
        click.echo(f"  KWOK nodes           {done.nodes}")
        if controllers is not None:
            for name in controllers.names:
                spec = controllers.builds[name].spec
                click.echo(f"  {name:20} {spec.module} {spec.version}, log {controllers.log(name)}")
        click.echo(f"  logs                 {plane.log_dir}")
        click.echo("Press Ctrl-C to stop (the cluster's state stays in the state directory).")
        stop = stop_on_signals()
        while not stop.is_set():
            plane.check_alive()
            if controllers is not None:
                controllers.check_alive()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        _step("stopping")
    finally:
        if controllers is not None:
            await asyncio.to_thread(controllers.close)
        await asyncio.to_thread(plane.close)


@k8s.command("up")
@click.option("--cluster", "cluster_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="cluster file whose (first) cluster's nodes become KWOK nodes")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".muster/k8s"),
              show_default=True, help="etcd data, certificates, logs and kubeconfigs")
@click.option("--profile", type=click.Choice(PROFILES), default="realistic", show_default=True,
              help="KWOK pod timings: realistic (pods start within seconds) or fast")
@click.option("--controllers", "controller_names", default="", metavar="NAMES", help=CONTROLLERS_HELP)
def up(cluster_file: Path | None, state_dir: Path, profile: str, controller_names: str) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK until Ctrl-C (and,
    with --controllers, the named workload controllers with their CRDs and webhooks)."""
    names = _controllers_option(controller_names)
    try:
        binaries = build(_step)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    builds = _build_controllers(names)
    plane = ControlPlane(state_dir, binaries, profile=profile)
    controllers = Controllers(plane, builds) if builds else None
    try:
        asyncio.run(_serve(plane, cluster_file, controllers))
    except ControlPlaneError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        if controllers is not None:
            controllers.close()
        plane.close()
