"""GPU utilisation per pod, read from NVIDIA's DCGM exporter (Prometheus text, ``DCGM_FI_DEV_GPU_UTIL``, one
sample per GPU labelled with the pod that holds it). Pure: text in, samples out.

The exporter labels a GPU's sample with ``pod`` and ``namespace`` when it maps GPUs to pods (its Kubernetes
mode); scraped through Prometheus the labels may be ``exported_pod`` / ``exported_namespace``: both are read.
A GPU held by no pod has no pod label and is skipped. A pod of several GPUs is as busy as its busiest GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def _label(labels: Mapping[str, str], name: str) -> str:
    return labels.get(name) or labels.get(f"exported_{name}") or ""
