"""``muster up``: the embedded system on one machine, no Docker: broker, topics, simulated clusters,
and the five services, each its own process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from schemas.config import ClusterConfig, MusterConfig
from schemas.topics import INTENTS_TOPIC
from services.cli.contexts import remember
from services.runtime.credentials import write_credentials, write_private
from services.runtime.options import ClusterAccess
from services.runtime.supervise import (
    Child,
    free_port,
    keep_previous_logs,
    service_children,
    stop_on_signals,
    supervise,
)
from services.spec.cluster_file import load_cluster_file

MAX_BROKERS = 9  # services.runtime.broker.cluster.MAX_BROKERS (not imported: `muster --help` stays light)
AUTH_FROM_BROKERS = 3  # unless told, a cluster this large runs with authentication and ACLs
DEFAULT_CLUSTER = Path(__file__).parent / "data" / "default-cluster.yaml"


def with_cluster_count(cfg: MusterConfig, count: int | None) -> MusterConfig:
    """``count`` clusters: the file's first ones, plus copies of its first cluster named ``<name>-2`` ..."""
    if count is None or count == len(cfg.clusters):
        return cfg
    if count < 1 or not cfg.clusters:
        raise click.BadParameter("needs at least one cluster", param_hint="--clusters")
    clusters = list(cfg.clusters[:count])
    base = cfg.clusters[0]
    while len(clusters) < count:
        clusters.append(base.model_copy(update={"name": f"{base.name}-{len(clusters) + 1}"}))
    return cfg.model_copy(update={"clusters": clusters})


def kubeconfig(urls: dict[str, str], admins: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A kubeconfig with one context per cluster: kubesim's without credentials (it is loopback only),
    a real control plane's with its admin kubeconfig's CA and token (``admins`` by cluster name)."""
    admins = admins or {}
    clusters, users, contexts = [], [{"name": "muster-dev", "user": {}}], []
    for name, url in urls.items():
        admin = admins.get(name)
        if admin is None:
            clusters.append({"name": name, "cluster": {"server": url}})
            contexts.append({"name": name, "context": {"cluster": name, "user": "muster-dev"}})
            continue
        clusters.append({"name": name, "cluster": admin["clusters"][0]["cluster"]})
        users.append({"name": f"{name}-admin", "user": admin["users"][0]["user"]})
        contexts.append({"name": name, "context": {"cluster": name, "user": f"{name}-admin"}})
    return {"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users, "contexts": contexts,
            "current-context": next(iter(urls))}


def _step(message: str) -> None:
    click.echo(click.style("» ", fg="cyan") + message)


async def _real_clusters(cfg: MusterConfig, state_dir: Path, stack: contextlib.AsyncExitStack,
                         controllers: tuple[str, ...] = (),
                         ) -> tuple[dict[str, ClusterAccess], dict[str, dict[str, Any]], list[Callable[[], None]]]:
    """One real control plane per cluster of ``cfg``, with its nodes as KWOK nodes (built first if needed), and
    the workload ``controllers`` running beside each."""
    from services.kubereal.bootstrap import bootstrap as bootstrap_plane
    from services.kubereal.build import build
    from services.kubereal.controller_build import build_controllers
    from services.kubereal.controllers import Controllers
    from services.kubereal.controlplane import ControlPlane

    _step("building the Kubernetes control plane from its Go modules (the first time only: ~7 min on 2 cores)")
    binaries = await asyncio.to_thread(build, lambda m: _step(click.style(m, dim=True)))
    builds = {}
    if controllers:
        _step(f"building the workload controllers {', '.join(controllers)} (the first time only: ~3 min each)")
        builds = await asyncio.to_thread(build_controllers, controllers, lambda m: _step(click.style(m, dim=True)))
    access: dict[str, ClusterAccess] = {}
    admins: dict[str, dict[str, Any]] = {}
    checks: list[Callable[[], None]] = []
    for cluster in cfg.clusters:
        plane = ControlPlane(state_dir / "k8s" / cluster.name, binaries, name=cluster.name, profile="realistic")
        # started on a worker thread that lives as long as this event loop (the control plane's children
        # end with the thread that started them)
        await asyncio.to_thread(plane.start)
        stack.push_async_callback(asyncio.to_thread, plane.close)
        checks.append(plane.check_alive)
        done = await bootstrap_plane(plane, cluster)
        await _tenant_namespaces(plane.admin_kubeconfig, [t.namespace for t in cfg.tenants])
        if builds:
            running = Controllers(plane, builds)
            await asyncio.to_thread(running.start)
            stack.push_async_callback(asyncio.to_thread, running.close)
            checks.append(running.check_alive)
            _step(f"workload controllers on {cluster.name!r}: {', '.join(running.names)} (logs beside the plane's)")
        gpu_metrics = await _simulated_dcgm_exporter(plane.admin_kubeconfig, stack)
        await _fake_cloud(cluster, stack, kubeconfig=plane.admin_kubeconfig)
        access[cluster.name] = ClusterAccess(plane.url, done.kubeconfigs, gpu_metrics=gpu_metrics)
        admins[cluster.name] = plane.admin_config
        _step(f"Kubernetes control plane {cluster.name!r}: {done.nodes} KWOK nodes at {plane.url} "
              f"(logs in {plane.log_dir})")
    return access, admins, checks


async def _simulated_dcgm_exporter(kubeconfig: Path, stack: contextlib.AsyncExitStack) -> str:
    """The DCGM exporter of the plane's KWOK nodes, played in this process (``services.kubesim.dcgm_exporter``);
    its URL, for the node watcher."""
    from services.kubesim.dcgm_exporter import DcgmExporter
    from services.runtime.kube import KubeRest, build_api_client

    api = await stack.enter_async_context(await build_api_client(kubeconfig=str(kubeconfig)))
    return await stack.enter_async_context(DcgmExporter(KubeRest(api)).serve())


async def _fake_cloud(cluster: ClusterConfig, stack: contextlib.AsyncExitStack, *, kubeconfig: Path | None = None,
                      url: str | None = None) -> None:
    """For a cluster with node groups that can grow: the cloud that answers its ProvisioningRequests with nodes
    (KWOK nodes on a real control plane, given by ``kubeconfig``; on kubesim, at ``url``), in this process
    (``services.kubereal.fake_cloud``), until ``muster up`` ends."""
    if not cluster.grows:
        return
    from services.kubereal.fake_cloud import FakeCloud
    from services.runtime.kube import KubeRest, build_api_client

    client = await build_api_client(url) if url is not None else await build_api_client(kubeconfig=str(kubeconfig))
    api = await stack.enter_async_context(client)
    stop = asyncio.Event()
    cloud = FakeCloud(KubeRest(api), cluster, kwok=url is None)
    task = asyncio.create_task(cloud.run(stop), name=f"fake-cloud:{cluster.name}")
    _step(f"fake cloud of {cluster.name!r}: sells nodes of its growable groups (answers ProvisioningRequests)")

    async def stopped() -> None:
        stop.set()
        await task

    stack.push_async_callback(stopped)


async def _tenant_namespaces(kubeconfig: Path, namespaces: list[str]) -> None:
    """Each tenant's namespace, as an administrator sets a tenant up (users then create objects there)."""
    from services.runtime.kube import KubeRest, build_api_client, ensure_namespace

    async with await build_api_client(kubeconfig=str(kubeconfig)) as api:
        rest = KubeRest(api)
        for namespace in sorted(set(namespaces)):
            await ensure_namespace(rest, namespace)


def broker_dir(state_dir: Path, brokers: int, *, auth: bool = False) -> Path:
    """Where the embedded Kafka keeps its data: ``kafka`` for one broker, ``kafka-<n>-brokers`` for a cluster,
    with ``-auth`` when it authenticates (so switching between them never mixes their data)."""
    return state_dir / (("kafka" if brokers == 1 else f"kafka-{brokers}-brokers") + ("-auth" if auth else ""))


def write_client_env(state_dir: Path, credentials: Any, bootstrap: str, tenants: list[str],
                     dashboards: tuple[str, ...] = ()) -> dict[str, Path]:
    """Per principal a ``MUSTER_KAFKA_*`` file (owner-only) under ``kafka-clients``: ``admin.env`` for the
    tools (``muster topics``, ``muster sim --from-kafka``...), ``tenant-<t>.env`` for a tenant's pipelines,
    ``dashboard-<d>.env`` for a read-only status reader."""
    from services.runtime.kafka.acls import dashboard_principal, tenant_principal

    folder = state_dir / "kafka-clients"
    settings = {"admin": credentials.admin(bootstrap),
                **{tenant_principal(t): credentials.tenant(t, bootstrap) for t in tenants},
                **{dashboard_principal(d): credentials.dashboard(d, bootstrap) for d in dashboards}}
    paths: dict[str, Path] = {}
    for name, kafka in settings.items():
        text = "".join(f"{key}={value}\n" for key, value in kafka.environment().items())
        paths[name] = folder / f"{name}.env"
        write_private(paths[name], text)
    return paths


#: the read-only status readers ``muster up --auth`` makes principals for (``dashboard-local``)
DASHBOARDS = ("local",)


def tenants_of(cfg: MusterConfig) -> list[str]:
    """Every tenant the configuration names (its queues' and its tenant entries)."""
    return sorted({q.tenant for q in cfg.queues} | {t.name for t in cfg.tenants})


def auth_default(auth: bool | None, brokers: int) -> bool:
    """``--auth``/``--no-auth`` as given; unsaid, on for a cluster of three or more brokers."""
    return brokers >= AUTH_FROM_BROKERS if auth is None else auth


async def _run(cfg: MusterConfig, config_file: Path, state_dir: Path, bootstrap: str | None, port: int,
               gateway_port: int, profile: str, kube: str, brokers: int, auth: bool = False,
               controllers: tuple[str, ...] = ()) -> None:
    from services.kubesim import KubeSim
    from services.kubesim.admin import DCGM_PATH
    from services.runtime.broker import resolve_broker
    from services.runtime.broker.security import BrokerSecurity
    from services.runtime.kafka.principals import CREDENTIALS_FILE, load_or_create
    from services.runtime.kafka.provision import provision
    from services.runtime.kafka.settings import KafkaSettings
    from services.runtime.kafka.topics import ensure_registry_topics, topic_replication

    what = "Apache Kafka" if brokers == 1 else f"{brokers} Apache Kafka brokers (KRaft, each also a controller)"
    _step(f"starting {what}{' with SASL/SCRAM and ACLs' if auth else ''} "
          "(the first run fetches the jars from Maven Central; this takes a minute)")
    log_dir = broker_dir(state_dir, brokers, auth=auth)
    tenants = tenants_of(cfg)
    credentials = None
    if auth:
        log_dir.mkdir(parents=True, exist_ok=True)
        credentials = await asyncio.to_thread(load_or_create, log_dir / CREDENTIALS_FILE, tenants, DASHBOARDS)
    broker = await asyncio.to_thread(resolve_broker, bootstrap, log_dir=log_dir, brokers=brokers,
                                     security=BrokerSecurity(credentials) if credentials else None)
    children: list[Child] = []
    try:
        _step(f"Kafka ready at {broker.bootstrap}; creating topics")
        kafka_env: dict[str, dict[str, str]] = {}
        if credentials is not None:
            kafka = credentials.admin(broker.bootstrap)
            done = await provision(kafka, credentials, tenants, dashboards=DASHBOARDS)
            created = done.topics_created
            kafka_env = {service: credentials.service(service, broker.bootstrap).environment()
                         for service in ("gateway", "queue-manager", "quota-accountant", "dispatcher", "node-watcher")}
            client_files = await asyncio.to_thread(write_client_env, state_dir, credentials, broker.bootstrap, tenants,
                                                   DASHBOARDS)
            _step(f"authentication on: {done.users} SCRAM users, {done.acls} ACLs; a tenant writes only "
                  "muster.intents.<tenant>.v1")
        else:
            kafka = KafkaSettings(bootstrap=broker.bootstrap)
            created = await ensure_registry_topics(kafka)
            client_files = {}
        replication = (await topic_replication(kafka, [INTENTS_TOPIC]))[INTENTS_TOPIC]
        _step(f"topics ready ({len(created)} created; {replication})")
        async with contextlib.AsyncExitStack() as stack:
            access: dict[str, ClusterAccess] = {}
            admins: dict[str, dict[str, Any]] = {}
            planes: list[Callable[[], None]] = []  # each real control plane's liveness check
            if kube == "real":
                access, admins, planes = await _real_clusters(cfg, state_dir, stack, controllers)
            else:
                for i, cluster in enumerate(cfg.clusters):
                    sim = KubeSim(cfg, cluster_name=cluster.name, profile=profile)
                    url = await stack.enter_async_context(sim.serve(host="127.0.0.1", port=port + i if port else 0))
                    # kubesim plays its nodes' DCGM exporters too (a pod's simulated GPU utilisation)
                    access[cluster.name] = ClusterAccess(url, gpu_metrics=url + DCGM_PATH)
                    await _fake_cloud(cluster, stack, url=url)
                    gpus = sum(g.count * g.gpus_per_node for g in cluster.node_groups)
                    nodes = sum(g.count for g in cluster.node_groups)
                    _step(f"simulated cluster {cluster.name!r}: {nodes} nodes, {gpus} GPUs at {url}")
            urls = {name: a.url for name, a in access.items()}
            config_path = state_dir / "kubeconfig"
            text = yaml.safe_dump(kubeconfig(urls, admins), sort_keys=False)
            await asyncio.to_thread(write_private, config_path, text)
            gateway_port = gateway_port or free_port()
            gateway_url = f"http://127.0.0.1:{gateway_port}"
            creds = await asyncio.to_thread(write_credentials, state_dir, cfg, gateway_url)
            admin_token = str(yaml.safe_load(creds["cli"].read_text(encoding="utf-8"))["token"])
            context_file = await asyncio.to_thread(remember, LOCAL_CONTEXT, gateway_url, admin_token)
            merged = state_dir / "config.yaml"
            await asyncio.to_thread(merged.write_text, yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
            children = service_children(cfg, state_dir, broker.bootstrap, access, merged, gateway_port,
                                        kafka_env=kafka_env)
            await asyncio.to_thread(keep_previous_logs, children)
            for child in children:
                await child.start()
            for child in children:
                await child.wait_healthy()
                _step(f"{child.name} up (metrics {child.url}/metrics)")
            click.echo("")
            click.echo(click.style("Muster is up.", bold=True))
            click.echo(f"  gateway API          {gateway_url}   (docs: {gateway_url}/docs)")
            click.echo(f"  web dashboard        {gateway_url}/ui   (sign in with a token below)")
            click.echo(f"  Kafka bootstrap      {broker.bootstrap}")
            if client_files:
                click.echo(f"  Kafka credentials    {state_dir / 'kafka-clients'}/<principal>.env (SASL/SCRAM-SHA-512; "
                           f"`set -a; . {client_files['admin']}` for the tools; tenants: tenant-<name>.env; "
                           "a read-only status reader: dashboard-local.env, groups dashboard-local.*)")
            else:
                click.echo("  Kafka access         open (no authentication: any client may write any topic)")
            click.echo(f"  Kafka topics         {replication}"
                       + ("" if replication.safe else " (development: one broker's loss loses data)"))
            for name, url in urls.items():
                click.echo(f"  cluster {name:12} {url}")
            click.echo(f"  kubeconfig           {config_path}   (KUBECONFIG={config_path} kubectl get pods -A)")
            click.echo(f"  CLI credentials      {creds['cli']} (admin; `muster list`, `muster submit FILE`)")
            click.echo(f"  CLI context          {LOCAL_CONTEXT!r} in {context_file} (the CLI works from any folder)")
            click.echo(f"  tenant tokens        {creds['tenant_tokens']} (per tenant: a member, <tenant>:tenant-admin)")
            click.echo(f"  service logs         {state_dir / 'logs'}")
            click.echo("Press Ctrl-C to stop.")
            await supervise(children, stop_on_signals(), lambda m: _step(click.style(m, fg="yellow")),
                            checks=planes)
            _step("stopping")
    finally:
        await asyncio.gather(*(child.stop() for child in children), return_exceptions=True)
        await asyncio.to_thread(broker.close)


LOCAL_CONTEXT = "local"  # the user-level CLI context `muster up` writes and selects


@click.command()
@click.option("--cluster", "cluster_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="cluster file (YAML); default: a small two-team A100/T4 cluster")
@click.option("--clusters", type=click.IntRange(1, 16), default=None, help="number of simulated clusters")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".muster"),
              show_default=True, help="broker log directory and generated kubeconfig")
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", default=None, help="use this Kafka instead")
@click.option("--kubesim-port", type=click.IntRange(0, 65000), default=8001, show_default=True,
              help="port of the first simulated cluster (0: any free port)")
@click.option("--gateway-port", type=click.IntRange(0, 65000), default=8000, show_default=True,
              help="port of the gateway's HTTP API (0: any free port)")
@click.option("--profile", type=click.Choice(["realistic", "zero"]), default="realistic", show_default=True,
              help="simulated kubelet delays (kubesim)")
@click.option("--kube", type=click.Choice(["kubesim", "real"]), default="kubesim", show_default=True,
              help="kubesim (quick), or a real control plane per cluster (etcd, kube-apiserver, controllers, "
                   "scheduler, KWOK nodes) built from Go modules on first use")
@click.option("--brokers", type=click.IntRange(1, MAX_BROKERS), default=1, show_default=True,
              help="Apache Kafka brokers to run (KRaft, each also a controller); 3 or more give Muster's topics "
                   "replication factor 3 and min.insync.replicas 2, so any one broker can fail")
@click.option("--controllers", default="", metavar="NAMES",
              help="with --kube real: workload controllers to build and run beside each control plane, "
                   "comma-separated (jobset, lws, kuberay, trainer) or all")
@click.option("--auth/--no-auth", default=None,
              help="embedded Kafka with SASL/SCRAM authentication and ACLs (a principal per service and per "
                   "tenant; a tenant writes only its own intents topic) [default: on from 3 brokers]")
def up(cluster_file: Path | None, clusters: int | None, state_dir: Path, bootstrap: str | None,
       kubesim_port: int, gateway_port: int, profile: str, kube: str, brokers: int, controllers: str,
       auth: bool | None) -> None:
    """Start the embedded system: Apache Kafka, Muster's topics, GPU clusters and the five services."""
    from services.kubereal.controller_catalog import parse as parse_controllers

    try:
        wanted = parse_controllers(controllers) if controllers else ()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--controllers") from exc
    if wanted and kube != "real":
        raise click.UsageError("--controllers runs beside a real control plane: add --kube real (kubesim runs no "
                               "workload controller)")
    if bootstrap and brokers != 1:
        raise click.UsageError("--brokers starts embedded brokers; with --bootstrap (or MUSTER_KAFKA_BOOTSTRAP) "
                               "Muster uses that Kafka as it is")
    if bootstrap and auth:
        raise click.UsageError("--auth secures the embedded brokers; an external Kafka keeps its own security "
                               "(give the services MUSTER_KAFKA_SECURITY_PROTOCOL, ..._SASL_USERNAME, ...)")
    try:
        cfg = with_cluster_count(load_cluster_file(cluster_file or DEFAULT_CLUSTER), clusters)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    state_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(cfg, cluster_file or DEFAULT_CLUSTER, state_dir.resolve(), bootstrap, kubesim_port,
                         gateway_port, profile, kube, brokers, auth_default(auth, brokers) and not bootstrap,
                         wanted))
