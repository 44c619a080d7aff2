"""GPU utilisation per pod, read from NVIDIA's DCGM exporter (Prometheus text, ``DCGM_FI_DEV_GPU_UTIL``, one
sample per GPU labelled with the pod that holds it). Pure: text in, samples out.

The exporter labels a GPU's sample with ``pod`` and ``namespace`` when it maps GPUs to pods (its Kubernetes
mode); scraped through Prometheus the labels may be ``exported_pod`` / ``exported_namespace``: both are read.
A GPU held by no pod has no pod label and is skipped. A pod of several GPUs is as busy as its busiest GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
#: (namespace, pod name) -> the highest utilisation (percent) of the pod's GPUs
Samples = dict[tuple[str, str], float]


def pod_utilisation(text: str) -> Samples:
    """The samples of one exporter's answer; ``ValueError`` for text that is not Prometheus' format."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        if family.name != UTILISATION:
            continue
        for sample in family.samples:
            pod = _label(sample.labels, "pod")
            namespace = _label(sample.labels, "namespace")
            if pod and namespace:
                key = (namespace, pod)
                out[key] = max(out.get(key, 0.0), float(sample.value))
    return out


def merged(answers: Iterable[Samples]) -> Samples:
    """The samples of several exporters (one per node) together."""
    out: Samples = {}
    for answer in answers:
        for key, value in answer.items():
            out[key] = max(out.get(key, 0.0), value)
    return out


def parse_selector(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` (equality only) as a mapping; ``ValueError`` for anything else."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or "!" in key:
            raise ValueError(f"not a key=value label selector: {text!r}")
        out[key.strip()] = value.strip()
    return out


def exporter_urls(pods: Iterable[Mapping[str, Any]], selector: Mapping[str, str], port: int,
                  path: str = "/metrics") -> list[str]:
    """The ``/metrics`` URLs of the running exporter pods ``selector`` picks (one per GPU node, a DaemonSet's),
    by pod IP, in name order."""
    if not selector:
        return []
    found = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        ip = status.get("podIP")
        if status.get("phase") == "Running" and ip and all(labels.get(k) == v for k, v in selector.items()):
            host = f"[{ip}]" if ":" in str(ip) else str(ip)
            found.append((f"{meta.get('namespace')}/{meta.get('name')}", f"http://{host}:{port}{path}"))
    return [url for _, url in sorted(found)]


def _label(labels: Mapping[str, str], name: str) -> str:
    return labels.get(name) or labels.get(f"exported_{name}") or ""
