"""``muster k8s``: build the real control plane once, and run it in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import click

from services.kubereal.build import BuildError, build
from services.kubereal.controlplane import PROFILES, ControlPlane, ControlPlaneError
from services.runtime.supervise import stop_on_signals
from services.spec.cluster_file import load_cluster_file


def _step(message: str) -> None:
    click.echo(click.style("» ", fg="cyan") + message, err=True)


@click.group("k8s")
def k8s() -> None:
    """A real Kubernetes control plane (etcd, kube-apiserver, controllers, scheduler, KWOK nodes)."""


@k8s.command("build")
@click.option("--force", is_flag=True, help="build again even when the cache has this version")
def build_command(force: bool) -> None:
    """Build the binaries from their Go modules into ~/.cache/muster/k8s (once; minutes on 2 cores)."""
    started = time.monotonic()
    try:
        binaries = build(_step, force=force)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    _step(f"binaries in {binaries.root / 'bin'} ({time.monotonic() - started:.0f}s)")
    click.echo(str(binaries.root))


async def _serve(plane: ControlPlane, cluster_file: Path | None) -> None:
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
        click.echo("")
        click.echo(click.style("Kubernetes is up.", bold=True))
        click.echo(f"  API server           {plane.url}")
        click.echo(f"  admin kubeconfig     {plane.admin_kubeconfig}")
        click.echo(f"  kubectl              {plane.binaries.path('kubectl')} --kubeconfig {plane.admin_kubeconfig}")
        for service, path in done.kubeconfigs.items():
            click.echo(f"  {service + ' kubeconfig':20} {path}")
        click.echo(f"  KWOK nodes           {done.nodes}")
        click.echo(f"  logs                 {plane.log_dir}")
        click.echo("Press Ctrl-C to stop (the cluster's state stays in the state directory).")
        stop = stop_on_signals()
        while not stop.is_set():
            plane.check_alive()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        _step("stopping")
    finally:
        await asyncio.to_thread(plane.close)


@k8s.command("up")
@click.option("--cluster", "cluster_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="cluster file whose (first) cluster's nodes become KWOK nodes")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".muster/k8s"),
              show_default=True, help="etcd data, certificates, logs and kubeconfigs")
@click.option("--profile", type=click.Choice(PROFILES), default="realistic", show_default=True,
              help="KWOK pod timings: realistic (pods start within seconds) or fast")
def up(cluster_file: Path | None, state_dir: Path, profile: str) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK until Ctrl-C."""
    try:
        binaries = build(_step)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    plane = ControlPlane(state_dir, binaries, profile=profile)
    try:
        asyncio.run(_serve(plane, cluster_file))
    except ControlPlaneError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        plane.close()
