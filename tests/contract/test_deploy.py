"""Deployment artefacts checked offline: Kubernetes manifests against the 1.30 OpenAPI schemas, least-privilege
RBAC per service, the Grafana dashboard against the metrics the services register, docker-compose's structure."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry

from services.core import SchedulerConfig
from services.dispatcher.metrics import DispatcherMetrics
from services.gateway.auth import TokenTable
from services.gateway.metrics import GatewayMetrics
from services.node_watcher.metrics import WatcherMetrics
from services.queue_manager.metrics import QueueMetrics
from services.queue_manager.queue_state import QueueState
from services.quota_accountant.metrics import AccountantMetrics
from services.runtime.kafka.settings import KafkaSettings
from services.runtime.metrics_access import MetricsAccess
from services.runtime.options import SERVICES
from services.runtime.service import ServiceRunner
from services.spec.cluster_file import parse_cluster_yaml

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
COMPONENTS = K8S / "components"
DASHBOARD = ROOT / "deploy" / "grafana" / "muster-dashboard.json"
KUSTOMIZE_FILE = "kustomization.yaml"
NOT_APPLIED = {"secrets.example.yaml"}  # templates the operator fills in, deliberately outside the kustomization
READ_VERBS = {"get", "list", "watch"}
NO_KUBE_ACCESS = {"queue_manager", "quota_accountant"}
# The exact permissions each service's code needs: (apiGroup, resource) -> verbs.
#: the workload kinds Muster queues besides batch Jobs: (API group, resource)
WORKLOAD_RESOURCES = (("apps", "deployments"), ("apps", "statefulsets"), ("jobset.x-k8s.io", "jobsets"),
                      ("trainer.kubeflow.org", "trainjobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"),
                      ("leaderworkerset.x-k8s.io", "leaderworkersets"))
MANAGE_VERBS = {"create", "get", "list", "patch", "delete"}
EXPECTED_RULES: dict[str, dict[tuple[str, str], set[str]]] = {
    "node_watcher": {("", "nodes"): READ_VERBS, ("", "pods"): READ_VERBS, ("batch", "jobs"): READ_VERBS,
                     **{r: READ_VERBS for r in WORKLOAD_RESOURCES},
                     ("autoscaling.x-k8s.io", "provisioningrequests"): READ_VERBS},  # the autoscaler's answers
    "dispatcher": {("batch", "jobs"): MANAGE_VERBS,
                   # create: a group of plain Pods submitted with its manifest is created by the dispatcher
                   ("", "pods"): {"create", "list", "watch", "patch", "delete"}, ("", "pods/binding"): {"create"},
                   # patch: the scale-down taint of a bought node given back
                   ("", "nodes"): {"list", "watch", "patch"}, ("", "events"): {"create"},
                   # asking the cluster's autoscaler for nodes (services/dispatcher/provisioning.py)
                   ("", "podtemplates"): {"create", "get"},
                   ("autoscaling.x-k8s.io", "provisioningrequests"): {"create", "get"},
                   ("", "namespaces"): {"create", "get"},
                   **{r: MANAGE_VERBS for r in WORKLOAD_RESOURCES},
                   ("trainer.kubeflow.org", "clustertrainingruntimes"): {"get"},
                   ("trainer.kubeflow.org", "trainingruntimes"): {"get"}},
    # the kube-native path: watch the labelled Jobs, tell them what Muster does (Events, status conditions)
    "gateway": {("batch", "jobs"): READ_VERBS, ("batch", "jobs/status"): {"get", "update"},
                ("", "pods"): READ_VERBS, **{r: READ_VERBS for r in WORKLOAD_RESOURCES},
                ("trainer.kubeflow.org", "clustertrainingruntimes"): {"get"},
                ("trainer.kubeflow.org", "trainingruntimes"): {"get"},
                ("", "events"): {"create"}},
}


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != KUSTOMIZE_FILE)


def load_docs(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def objects(under: Path = K8S, *, base_only: bool = False) -> list[Obj]:
    """The objects of the manifests under ``under``; ``base_only`` leaves out the optional components."""
    return [doc for path in manifest_files() if path.is_relative_to(under)
            and not (base_only and path.is_relative_to(COMPONENTS)) for doc in load_docs(path)]


def of_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def service_of(deployment: Obj) -> str:
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "serve", f"{deployment['metadata']['name']}: not started with `muster serve`"
    return str(args[1]).replace("-", "_")


def option(args: list[str], flag: str) -> str:
    assert flag in args, f"{flag} missing from {args}"
    return args[args.index(flag) + 1]


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def deployments_by_service() -> dict[str, list[Obj]]:
    found: dict[str, list[Obj]] = {}
    for dep in of_kind(objects(), "Deployment"):
        found.setdefault(service_of(dep), []).append(dep)
    return found


# --- every manifest is a valid Kubernetes object --------------------------------------------------------------


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(K8S)))
def test_manifest_validates_against_kubernetes_1_30(path: Path) -> None:
    docs = load_docs(path)
    assert docs, f"{path} holds no objects"
    for obj in docs:
        kubernetes_validate.validate(obj, "1.30", strict=True)


def test_kustomizations_reference_existing_files_and_cover_every_manifest() -> None:
    referenced: set[Path] = set()
    for kfile in K8S.rglob(KUSTOMIZE_FILE):
        spec = yaml.safe_load(kfile.read_text(encoding="utf-8"))
        assert spec["kind"] in ("Kustomization", "Component")
        for entry in [*spec.get("resources", []), *spec.get("components", [])]:
            target = (kfile.parent / entry).resolve()
            assert target.exists(), f"{kfile}: {entry} does not exist"
            referenced.add(target)
    for comment_ref in re.findall(r"#\s+-\s+(\S+)", (K8S / KUSTOMIZE_FILE).read_text(encoding="utf-8")):
        assert (K8S / comment_ref).is_dir(), f"documented component {comment_ref} does not exist"
    unlisted = {p.name for p in manifest_files() if p.resolve() not in referenced}
    assert unlisted == NOT_APPLIED


def kustomize(directory: Path) -> list[Obj]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60,
                          check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_kustomize_builds_into_muster_system_with_the_pinned_image() -> None:
    built = kustomize(K8S)
    for obj in built:
        kubernetes_validate.validate(obj, "1.30", strict=True)
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "muster-system"
    images = {c["image"] for d in of_kind(built, "Deployment") for c in d["spec"]["template"]["spec"]["containers"]}
    assert len(images) == 1 and ":" in images.pop()


def test_gateway_kube_jobs_component_grants_its_rights_and_sets_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / KUSTOMIZE_FILE).write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(K8S, tmp_path)],
        "components": [os.path.relpath(COMPONENTS / "gateway-kube-jobs", tmp_path)]}))
    built = kustomize(tmp_path)
    for obj in built:
        kubernetes_validate.validate(obj, "1.30", strict=True)
    gateway = next(d for d in of_kind(built, "Deployment") if service_of(d) == "gateway")
    pod = gateway["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert env_of(pod["containers"][0])["KUBECONFIG"].startswith(mounts["kubeconfig"] + "/")
    assert granted(built)["muster-gateway"] == EXPECTED_RULES["gateway"]


# --- Deployments ----------------------------------------------------------------------------------------------


def test_every_service_has_a_deployment_and_every_deployment_runs_a_service() -> None:
    assert set(deployments_by_service()) == set(SERVICES)


@pytest.mark.parametrize("dep", of_kind(objects(), "Deployment"), ids=lambda d: d["metadata"]["name"])
def test_deployment_is_probed_scraped_limited_and_unprivileged(dep: Obj) -> None:
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    port = int(option(container["args"], "--http-port"))
    assert option(container["args"], "--http-host") == "0.0.0.0"
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["http"] == port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == port
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    ctx = container["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"]["drop"] == ["ALL"] and not ctx["capabilities"].get("add")
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {v["name"] for v in pod["volumes"]}
    assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), "read-only root needs a writable /tmp"


def test_deployments_reference_only_defined_configmaps_and_secrets() -> None:
    everything = objects()
    defined = {(o["kind"], o["metadata"]["name"]) for o in everything}
    for dep in of_kind(everything, "Deployment") + of_kind(everything, "Job"):
        pod = dep["spec"]["template"]["spec"]
        refs = [("ConfigMap", v["configMap"]["name"]) for v in pod.get("volumes", []) if "configMap" in v]
        refs += [("Secret", v["secret"]["secretName"]) for v in pod.get("volumes", []) if "secret" in v]
        for source in pod["containers"][0].get("envFrom", []):
            refs += [("ConfigMap", source["configMapRef"]["name"])] if "configMapRef" in source else []
            refs += [("Secret", source["secretRef"]["name"])] if "secretRef" in source else []
        missing = [ref for ref in refs if ref not in defined]
        assert not missing, f"{dep['metadata']['name']} references undefined {missing}"


def test_every_deployment_chooses_its_metrics_exposure_so_prometheus_can_scrape_it() -> None:
    """The services' default (localhost only) would refuse a scraper on another pod: the manifests choose
    `public` deliberately, from one ConfigMap, with the optional token Secret next to it."""
    everything = objects()
    settings = {o["metadata"]["name"]: o.get("data", {}) | o.get("stringData", {})
                for o in of_kind(everything, "ConfigMap") + of_kind(everything, "Secret")}
    for dep in of_kind(everything, "Deployment"):
        sources = dep["spec"]["template"]["spec"]["containers"][0]["envFrom"]
        config_maps = [s["configMapRef"]["name"] for s in sources if "configMapRef" in s]
        secrets = {s["secretRef"]["name"]: s["secretRef"].get("optional", False) for s in sources if "secretRef" in s}
        env = {k: v for name in config_maps for k, v in settings[name].items()}
        access = MetricsAccess.from_env(env)
        assert access.expose == "public", dep["metadata"]["name"]
        assert secrets.get("muster-metrics-token") is True, dep["metadata"]["name"]
    assert set(settings["muster-metrics-token"]) == {"MUSTER_METRICS_TOKEN"}


def test_singletons_recreate_and_gateway_is_replicated_behind_a_service_and_pdb() -> None:
    by_service = deployments_by_service()
    for name in ("queue_manager", "quota_accountant", "dispatcher", "node_watcher"):
        for dep in by_service[name]:
            assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    (gateway,) = by_service["gateway"]
    assert gateway["spec"]["replicas"] == 2
    pod_labels = gateway["spec"]["template"]["metadata"]["labels"]
    services = [s for s in of_kind(objects(), "Service") if s["spec"]["selector"].items() <= pod_labels.items()]
    pdbs = [p for p in of_kind(objects(), "PodDisruptionBudget")
            if p["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()]
    assert len(services) == 1 and len(pdbs) == 1 and pdbs[0]["spec"]["minAvailable"] == 1


def test_cluster_services_name_their_cluster() -> None:
    by_service = deployments_by_service()
    for dep in by_service["dispatcher"] + by_service["node_watcher"]:
        cluster = env_of(dep["spec"]["template"]["spec"]["containers"][0])["MUSTER_CLUSTER"]
        assert dep["metadata"]["name"].endswith(f"-{cluster}")
        assert dep["spec"]["selector"]["matchLabels"]["muster.dev/cluster"] == cluster


def test_environment_names_are_settings_the_services_read() -> None:
    kafka_fields = {f"MUSTER_KAFKA_{name.upper()}" for name in KafkaSettings.model_fields}
    scheduler_fields = {f"MUSTER_SCHEDULER_{f.name.upper()}" for f in dataclasses.fields(SchedulerConfig)
                        if f.name != "explicit"}
    for obj in of_kind(objects(), "ConfigMap") + of_kind(objects(), "Secret"):
        for key in {**obj.get("data", {}), **obj.get("stringData", {})}:
            if key.startswith("MUSTER_KAFKA_"):
                assert key in kafka_fields, f"{obj['metadata']['name']}: unknown setting {key}"
            elif key.startswith("MUSTER_SCHEDULER_"):
                assert key in scheduler_fields, f"{obj['metadata']['name']}: unknown setting {key}"
    kafka = next(o for o in objects() if o["metadata"]["name"] == "muster-kafka")["data"]
    KafkaSettings(**{k.removeprefix("MUSTER_KAFKA_").lower(): v for k, v in kafka.items()})


def test_example_cluster_configuration_parses() -> None:
    config_map = next(o for o in of_kind(objects(), "ConfigMap") if o["metadata"]["name"] == "muster-config")
    config = parse_cluster_yaml(config_map["data"]["cluster.yaml"], source="muster-config")
    assert config.queues and config.tenants


# --- RBAC -----------------------------------------------------------------------------------------------------


def granted(objs: list[Obj]) -> dict[str, dict[tuple[str, str], set[str]]]:
    """ServiceAccount name -> (apiGroup, resource) -> verbs, over every binding in ``objs``."""
    roles = {(r["kind"], r["metadata"]["name"]): r for r in of_kind(objs, "ClusterRole") + of_kind(objs, "Role")}
    result: dict[str, dict[tuple[str, str], set[str]]] = {}
    for binding in of_kind(objs, "ClusterRoleBinding") + of_kind(objs, "RoleBinding"):
        role = roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]))
        assert role is not None, f"{binding['metadata']['name']} binds an undefined role"
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            rules = result.setdefault(subject["name"], {})
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        rules.setdefault((group, resource), set()).update(rule["verbs"])
    return result


def account_of(service: str) -> str:
    (dep, *_) = deployments_by_service()[service]
    return str(dep["spec"]["template"]["spec"]["serviceAccountName"])


def test_no_wildcards_and_no_privilege_escalation_verbs_anywhere() -> None:
    for role in of_kind(objects(), "ClusterRole") + of_kind(objects(), "Role"):
        for rule in role["rules"]:
            for field in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule[field], f"{role['metadata']['name']}: wildcard {field}"
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            assert "secrets" not in rule["resources"] and "nonResourceURLs" not in rule


def test_each_service_gets_exactly_what_its_code_uses() -> None:
    rules = granted(objects(base_only=True))
    assert rules.get(account_of("node_watcher")) == EXPECTED_RULES["node_watcher"]
    assert rules.get(account_of("dispatcher")) == EXPECTED_RULES["dispatcher"]
    assert all(verbs <= READ_VERBS for verbs in rules[account_of("node_watcher")].values())
    assert account_of("gateway") not in rules, "the base gateway has no Kubernetes access"
    assert granted(objects(COMPONENTS / "gateway-kube-jobs"))[account_of("gateway")] == EXPECTED_RULES["gateway"]


def test_services_without_kubernetes_access_have_no_bindings_and_no_token() -> None:
    rules = granted(objects())  # with the optional components too
    accounts = {a["metadata"]["name"]: a for a in of_kind(objects(), "ServiceAccount")}
    accounts_in_use = {account_of(s) for s in SERVICES}
    assert len(accounts_in_use) == len(SERVICES), "every service runs under its own ServiceAccount"
    for service in NO_KUBE_ACCESS:
        name = account_of(service)
        assert name not in rules
        assert accounts[name]["automountServiceAccountToken"] is False
        (dep,) = deployments_by_service()[service]
        assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


# --- Grafana --------------------------------------------------------------------------------------------------


def exposed_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name a registry exposes, whether or not a labelled child exists yet."""
    suffixes = {"counter": ("_total", "_created"), "gauge": ("",), "info": ("_info",),
                "histogram": ("_bucket", "_count", "_sum", "_created"), "summary": ("", "_count", "_sum", "_created")}
    return {family.name + suffix for family in registry.collect() for suffix in suffixes[family.type]}


async def registered_metric_names() -> set[str]:
    names: set[str] = set()
    registries = [CollectorRegistry() for _ in range(6)]
    GatewayMetrics(registries[0], lambda: 0)
    QueueMetrics(registries[1], QueueState)
    AccountantMetrics(registries[2])
    DispatcherMetrics(registries[3], "east")
    WatcherMetrics(registries[4], "east")
    runner = ServiceRunner("probe", registry=registries[5], http_port=0)

    async def stop_at_once(_: object) -> None:
        runner.stop()

    runner.tasks = [stop_at_once]
    await runner.run(handle_signals=False)
    for registry in registries:
        names |= exposed_names(registry)
    return names


def dashboard_queries(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from dashboard_queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from dashboard_queries(item)


async def test_dashboard_queries_only_metrics_the_services_register() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    queried = {m for q in dashboard_queries(dashboard) for m in re.findall(r"\bmuster_[a-z0-9_]+", q)}
    unknown = queried - await registered_metric_names()
    assert not unknown, f"the dashboard queries metrics no service registers: {sorted(unknown)}"
    for prefix in ("muster_gateway_", "muster_queue_manager_", "muster_quota_accountant_", "muster_dispatcher_",
                   "muster_node_watcher_", "muster_service_up"):
        assert any(m.startswith(prefix) for m in queried), f"no panel for {prefix}"


# --- docker-compose and Dockerfile ----------------------------------------------------------------------------


def test_compose_runs_kafka_topics_kubesim_and_every_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    services: dict[str, Obj] = compose["services"]
    assert services["kafka"]["image"] == "apache/kafka:4.4.0"
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["topics"]["command"] == ["topics", "create", "--allow-unsafe"]  # one broker: a demo
    assert services["kubesim"]["command"][0] == "kubesim"
    for name in SERVICES:
        spec = services[name.replace("_", "-")]
        assert spec["command"][:2] == ["serve", name.replace("_", "-")]
        assert spec["depends_on"]["topics"] == {"condition": "service_completed_successfully"}
        port = option(spec["command"], "--http-port")
        assert f":{port}/healthz" in " ".join(spec["healthcheck"]["test"])
        env = spec["environment"]
        assert env["MUSTER_KAFKA_BOOTSTRAP"] == "kafka:9092"
        if "MUSTER_KUBE_SERVER" in env:
            assert env["MUSTER_KUBE_SERVER"].startswith("http://kubesim:")
            assert spec["depends_on"]["kubesim"] == {"condition": "service_healthy"}
    for name, spec in services.items():
        assert set(spec.get("depends_on", {})) <= set(services), f"{name} depends on an unknown service"
        if name != "kafka":
            assert spec["image"] == "muster:dev" and spec["build"] == "." and spec["read_only"] is True


def test_compose_files_named_in_the_environment_exist_on_the_host() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    for spec in compose["services"].values():
        mounts = [v.split(":")[:2] for v in spec.get("volumes", []) if v.startswith("./")]
        paths = [v for k, v in (spec.get("environment") or {}).items() if k.endswith("_FILE")]
        paths += [a for a in spec.get("command", []) if str(a).startswith("/etc/muster/")]
        for path in paths:
            host = next((ROOT / src / Path(path).relative_to(dst) for src, dst in mounts
                         if Path(path).is_relative_to(dst)), None)
            assert host is not None and host.is_file(), f"{path} is not mounted from an existing file"
            if path.endswith("tokens.yaml"):
                assert len(TokenTable.load(host)) > 0
            else:
                parse_cluster_yaml(host.read_text(encoding="utf-8"), source=str(host))


def test_dockerfile_runs_as_an_unprivileged_user() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users and all(not u.startswith(("0", "root")) for u in users)
    assert int(users[-1].split(":")[0]) == 10001, "the manifests' runAsUser must match the image's user"
    assert re.search(r'^ENTRYPOINT \["muster"\]', text, flags=re.MULTILINE)
