"""The Helm chart (deploy/helm/muster) rendered with ``helm template``: valid Kubernetes objects, the same
objects as the Kustomize base in substance, a dispatcher and node watcher per cluster from values, Secrets
referenced and never rendered, the Grafana dashboard as a ConfigMap, the optional ServiceMonitor and
PrometheusRule over metrics the services register.

Helm is built from its Go module by scripts/install into ~/.cache/muster/helm/<version>. Without it the
tests skip, except under CI (``CI`` set), where a missing helm is a failure.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.contract.test_deploy import (
    COMPONENTS,
    DASHBOARD,
    EXPECTED_RULES,
    K8S,
    KUSTOMIZE_FILE,
    Obj,
    granted,
    kustomize,
    of_kind,
    registered_metric_names,
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "muster"
NAMESPACE = "muster-system"
#: labels and annotations Helm adds that the Kustomize base has no reason to carry
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}
HELM_ONLY = {("ConfigMap", "muster-grafana-dashboard")}
PROMETHEUS_KINDS = {"ServiceMonitor", "PrometheusRule"}


def helm_version() -> str:
    found = re.search(r"^HELM_VERSION=(\S+)$", (ROOT / "scripts" / "install").read_text(encoding="utf-8"), re.M)
    assert found, "scripts/install pins HELM_VERSION"
    return found.group(1)


def helm_binary() -> str:
    cache = Path(os.environ.get("MUSTER_CACHE_DIR") or Path.home() / ".cache" / "muster")
    built = cache / "helm" / helm_version() / "helm"
    if built.exists():
        return str(built)
    on_path = shutil.which("helm")
    if on_path is not None:
        return on_path
    if os.environ.get("CI"):
        pytest.fail(f"helm is missing under CI: scripts/install builds it into {built}")
    pytest.skip(f"helm is not installed (scripts/install builds it into {built} when Go is present)")


def render(*settings: str, namespace: str = NAMESPACE) -> list[Obj]:
    args = [helm_binary(), "template", "muster", str(CHART), "--namespace", namespace]
    for setting in settings:
        args += ["--set", setting]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def kustomize_with_kube_jobs(tmp_path: Path) -> list[Obj]:
    (tmp_path / KUSTOMIZE_FILE).write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(K8S, tmp_path)],
        "components": [os.path.relpath(COMPONENTS / "gateway-kube-jobs", tmp_path)]}))
    return kustomize(tmp_path)


def substance(obj: Obj) -> Obj:
    """``obj`` without what only Helm adds: its own labels, hook and checksum annotations."""
    result = copy.deepcopy(obj)
    metas = [result["metadata"]]
    template = result.get("spec", {}).get("template")
    if isinstance(template, dict):
        metas.append(template["metadata"])
    for meta in metas:
        for key in HELM_LABELS:
            meta.get("labels", {}).pop(key, None)
        annotations = meta.get("annotations", {})
        for key in [k for k in annotations if k.startswith(("helm.sh/", "checksum/"))]:
            del annotations[key]
        if "annotations" in meta and not annotations:
            del meta["annotations"]
    return result


def by_identity(objs: list[Obj]) -> dict[tuple[str, str], Obj]:
    found: dict[tuple[str, str], Obj] = {}
    for obj in objs:
        ident = (obj["kind"], obj["metadata"]["name"])
        assert ident not in found, f"{ident} rendered twice"
        found[ident] = obj
    return found


def assert_same_substance(helm: list[Obj], kustomized: list[Obj]) -> None:
    rendered = {k: substance(v) for k, v in by_identity(helm).items() if k not in HELM_ONLY}
    expected = {k: substance(v) for k, v in by_identity(kustomized).items()}
    assert sorted(rendered) == sorted(expected)
    for ident, obj in expected.items():
        assert rendered[ident] == obj, f"{ident} differs between the chart and the Kustomize base"


def deployment(objs: list[Obj], name: str) -> Obj:
    (found,) = [d for d in of_kind(objs, "Deployment") if d["metadata"]["name"] == name]
    return found


def container_env(dep: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in dep["spec"]["template"]["spec"]["containers"][0].get("env", [])}


# --- the same objects as Kustomize ----------------------------------------------------------------------------


def test_defaults_render_the_kustomize_base() -> None:
    assert_same_substance(render("namespace.create=true"), kustomize(K8S))


def test_kube_jobs_render_the_kustomize_base_with_its_component(tmp_path: Path) -> None:
    helm = render("namespace.create=true", "gateway.kubeJobs.enabled=true")
    assert_same_substance(helm, kustomize_with_kube_jobs(tmp_path))
    assert granted(helm)["muster-gateway"] == EXPECTED_RULES["gateway"]


def test_every_rendering_validates_against_kubernetes_1_30() -> None:
    renderings = [render("namespace.create=true"),
                  render("gateway.kubeJobs.enabled=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true",
                         "clusters[0].name=east", "clusters[1].name=west", "topics.allowUnsafe=true",
                         "image.pullPolicy=Always", "imagePullSecrets[0].name=registry"),
                  render("central=false", "clusters[0].name=west")]
    for objs in renderings:
        for obj in objs:
            if obj["kind"] in PROMETHEUS_KINDS:
                assert obj["apiVersion"] == "monitoring.coreos.com/v1"
                continue
            kubernetes_validate.validate(obj, "1.30", strict=True)
            if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
                assert obj["metadata"]["namespace"] == NAMESPACE


# --- values ---------------------------------------------------------------------------------------------------


def test_one_dispatcher_and_node_watcher_per_cluster_with_the_same_rights() -> None:
    objs = render("clusters[0].name=east", "clusters[1].name=west",
                  "clusters[1].dispatcher.resources.limits.memory=3Gi")
    for cluster in ("east", "west"):
        for service in ("dispatcher", "node-watcher"):
            dep = deployment(objs, f"muster-{service}-{cluster}")
            assert container_env(dep)["MUSTER_CLUSTER"] == cluster
            assert dep["spec"]["selector"]["matchLabels"]["muster.dev/cluster"] == cluster
            assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
            assert dep["spec"]["template"]["spec"]["serviceAccountName"] == f"muster-{service}"
    west = deployment(objs, "muster-dispatcher-west")["spec"]["template"]["spec"]["containers"][0]
    assert west["resources"] == {"limits": {"memory": "3Gi"}}
    rules = granted(objs)
    assert rules["muster-dispatcher"] == EXPECTED_RULES["dispatcher"]
    assert rules["muster-node-watcher"] == EXPECTED_RULES["node_watcher"]
    assert "muster-gateway" not in rules


def test_a_gpu_cluster_alone_renders_only_its_dispatcher_and_node_watcher() -> None:
    objs = render("central=false", "clusters[0].name=west")
    names = {d["metadata"]["name"] for d in of_kind(objs, "Deployment")}
    assert names == {"muster-dispatcher-west", "muster-node-watcher-west"}
    assert not of_kind(objs, "Job") and not of_kind(objs, "Service")
    assert {o["metadata"]["name"] for o in of_kind(objs, "ConfigMap")} == {"muster-kafka", "muster-telemetry",
                                                                         "muster-metrics"}


def test_secrets_are_referenced_by_name_and_never_rendered() -> None:
    objs = render("secrets.gatewayTokens=tokens-from-vault", "secrets.kafkaCredentials=kafka-user",
                  "secrets.kafkaTls=kafka-ca", "secrets.metricsToken=scrape-token", "gateway.kubeJobs.enabled=true")
    assert not of_kind(objs, "Secret")
    gateway = deployment(objs, "muster-gateway")["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"] for v in gateway["volumes"] if "secret" in v}
    assert secrets == {"tokens-from-vault", "kafka-ca"}
    for dep in of_kind(objs, "Deployment") + of_kind(objs, "Job"):
        sources = dep["spec"]["template"]["spec"]["containers"][0]["envFrom"]
        assert {"secretRef": {"name": "kafka-user", "optional": True}} in sources
    for dep in of_kind(objs, "Deployment"):
        sources = dep["spec"]["template"]["spec"]["containers"][0]["envFrom"]
        assert {"secretRef": {"name": "scrape-token", "optional": True}} in sources


def test_kafka_scheduler_telemetry_and_metrics_settings_reach_their_config_maps() -> None:
    objs = render("kafka.bootstrap=broker:9093", "kafka.extra.MUSTER_KAFKA_SSL_CAFILE=/etc/muster/kafka-tls/ca.crt",
                  "scheduler.MUSTER_SCHEDULER_POLICY=muster-no-backfill", "telemetry.logFormat=text",
                  "telemetry.otlpEndpoint=http://collector:4318", "metrics.expose=localhost")
    maps = {o["metadata"]["name"]: o["data"] for o in of_kind(objs, "ConfigMap")}
    assert maps["muster-kafka"]["MUSTER_KAFKA_BOOTSTRAP"] == "broker:9093"
    assert maps["muster-kafka"]["MUSTER_KAFKA_SSL_CAFILE"] == "/etc/muster/kafka-tls/ca.crt"
    assert maps["muster-scheduler"] == {"MUSTER_SCHEDULER_POLICY": "muster-no-backfill"}
    assert maps["muster-metrics"] == {"MUSTER_METRICS_EXPOSE": "localhost"}
    assert maps["muster-telemetry"] == {"MUSTER_LOG_FORMAT": "text", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


def test_grafana_dashboard_config_map_holds_the_dashboard() -> None:
    (dashboard,) = [o for o in of_kind(render(), "ConfigMap") if o["metadata"]["name"] == "muster-grafana-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert json.loads(dashboard["data"]["muster-dashboard.json"]) == shipped, (
        "deploy/helm/muster/files/muster-dashboard.json must be a copy of deploy/grafana/muster-dashboard.json")


# --- Prometheus Operator objects ------------------------------------------------------------------------------


def test_prometheus_objects_are_off_by_default() -> None:
    kinds = {o["kind"] for o in render()}
    assert not kinds & PROMETHEUS_KINDS


def test_service_monitor_scrapes_every_service_through_a_headless_service() -> None:
    objs = render("serviceMonitor.enabled=true", "serviceMonitor.labels.release=prometheus")
    (monitor,) = of_kind(objs, "ServiceMonitor")
    (metrics,) = [s for s in of_kind(objs, "Service") if s["metadata"]["name"] == "muster-metrics"]
    assert metrics["spec"]["clusterIP"] == "None"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics" and endpoint["honorLabels"] is True
    selector = metrics["spec"]["selector"]
    for dep in of_kind(objs, "Deployment"):
        assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


async def test_alerts_cover_lag_dead_letters_and_stuck_admissions_over_registered_metrics() -> None:
    (rule,) = of_kind(render("prometheusRule.enabled=true"), "PrometheusRule")
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert {"MusterConsumerLagHigh", "MusterDeadLettersGrowing", "MusterAdmissionsNotDispatched"} <= set(alerts)
    assert "muster_kafka_consumer_lag" in alerts["MusterConsumerLagHigh"]["expr"]
    assert "muster_kafka_dead_letters_total" in alerts["MusterDeadLettersGrowing"]["expr"]
    assert alerts["MusterServiceDown"]["expr"] == 'up{job="muster-metrics"} == 0'  # the ServiceMonitor's job
    known = await registered_metric_names()
    for alert in alerts.values():
        used = set(re.findall(r"\bmuster_[a-z0-9_]+", alert["expr"]))
        assert used <= known, f"{alert['alert']} queries unregistered metrics {sorted(used - known)}"
        assert alert["annotations"]["summary"] and alert["labels"]["severity"] in {"warning", "critical"}


def test_chart_lints() -> None:
    done = subprocess.run([helm_binary(), "lint", "--strict", str(CHART)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
