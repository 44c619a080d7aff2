"""``muster kubesim``: serve one cluster of a cluster file as a simulated Kubernetes API."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import click

from services.kubesim.sim import KubeSim


def kubeconfig_snippet(url: str, cluster: str) -> str:
    """A kubeconfig that points kubectl or kubernetes-asyncio at ``url`` without credentials."""
    return "\n".join(
        [
            "apiVersion: v1",
            "kind: Config",
            "clusters:",
            f"- name: {cluster}",
            "  cluster:",
            f"    server: {url}",
            "contexts:",
            f"- name: {cluster}",
            "  context:",
            f"    cluster: {cluster}",
            f"    user: {cluster}",
            f"current-context: {cluster}",
            "users:",
            f"- name: {cluster}",
            "  user: {}",
        ]
    )


async def _run(sim: KubeSim, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with sim.serve(host=host, port=port) as url:
        click.echo(f"kubesim: cluster {sim.cluster_name!r} ({sim.profile.name} profile) listening on {url}")
        click.echo(f"  kubectl --server {url} get nodes")
        click.echo("# kubeconfig:")
        click.echo(kubeconfig_snippet(url, sim.cluster_name))
        await stop.wait()


@click.command("kubesim")
@click.option("--cluster", "cluster_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="cluster file (YAML)")
@click.option("--port", default=0, show_default=True, type=int, help="TCP port; 0 picks a free one")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--cluster-name", default=None, help="which cluster of the file to serve (default: the first)")
@click.option("--profile", type=click.Choice(["zero", "realistic"]), default="realistic", show_default=True,
              help="kubelet timings")
def kubesim(cluster_file: str, port: int, host: str, cluster_name: str | None, profile: str) -> None:
    """Serve a simulated Kubernetes cluster (API, scheduler, Job controller, kubelet) on HOST:PORT."""
    try:
        sim = KubeSim.from_cluster_file(cluster_file, cluster_name=cluster_name, profile=profile)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    asyncio.run(_run(sim, host, port))
