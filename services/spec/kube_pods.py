"""Reading a Kubernetes pod template (``PodTemplateSpec`` or ``PodSpec``) into Muster's ``PodTemplate``: the
first container's image, command, arguments, environment and working directory, the pod's resources, the
security it asks for over every container. Pure; shared by the gateway's kube-native ``batch/v1`` Jobs and
by every workload kind (``services.spec.kinds``).

The environment travels as the HTTP path's would: ``valueFrom.secretKeyRef`` as a reference (never resolved),
``envFrom.secretRef`` as ``env_from``, plain values as values (those named in ``plain_ok`` marked
``not_secret``). Other sources (``fieldRef``, ``configMapKeyRef``...) are not carried.

Two readings of resources:

- ``container_resources``: one container's (the first, for the kube-native ``batch/v1`` Job path, as before);
- ``pod_resources``: the pod's request as the kube-scheduler computes it (see its docstring), for the kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from schemas.jobspec import (
    EnvEntry,
    EnvFromSecret,
    EnvVar,
    PodTemplate,
    ResourceRequest,
    SecretKeyRef,
    SecretRef,
    SecuritySpec,
)
from schemas.kube import GPU_RESOURCE, GPU_TYPE, PLAIN_ENV
from services.spec.quantity import parse_quantity

KubeObject = dict[str, Any]

#: what a pod that states no CPU (memory) request is charged: the spec's own defaults
DEFAULT_CPU: str = str(ResourceRequest.model_fields["cpu"].default)
DEFAULT_MEMORY: str = str(ResourceRequest.model_fields["memory"].default)


def plain_env_names(annotations: Mapping[str, str]) -> frozenset[str]:
    """The environment entries the object's ``muster.dev/plain-env`` annotation says are not secrets."""
    return frozenset(n.strip() for n in str(annotations.get(PLAIN_ENV, "")).split(",") if n.strip())


def security(pod: Mapping[str, Any]) -> SecuritySpec:
    """What the pod asks for beyond the defaults, over every container (init and ephemeral ones too): the
    user's own object is what runs, so a sidecar's privileges count as much as the first container's.
    Added Linux capabilities count as ``privileged``."""
    pod_ctx = pod.get("securityContext") or {}
    containers = [c for key in ("containers", "initContainers", "ephemeralContainers")
                  for c in pod.get(key) or [] if isinstance(c, dict)]
    contexts = [c.get("securityContext") or {} for c in containers]
    return SecuritySpec(
        privileged=any(bool(ctx.get("privileged")) or bool((ctx.get("capabilities") or {}).get("add"))
                       for ctx in contexts),
        run_as_root=any(ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0 for ctx in contexts),
        host_network=bool(pod.get("hostNetwork")),
        host_pid=bool(pod.get("hostPID")),
        host_ipc=bool(pod.get("hostIPC")),
        host_path_volumes=[str(v["hostPath"].get("path", "")) for v in pod.get("volumes") or []
                           if isinstance(v, dict) and isinstance(v.get("hostPath"), dict)],
    )


def container_resources(container: Mapping[str, Any], node_selector: Mapping[str, str]) -> ResourceRequest:
    """One container's resources: GPUs from its ``nvidia.com/gpu`` limit (else request), CPU and memory from
    its requests (else limits, else the spec's defaults), the GPU type from the pod's node selector."""
    res = container.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    gpus = limits.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0))
    return ResourceRequest(
        gpus=int(gpus),
        gpu_type=node_selector.get(GPU_TYPE),
        cpu=str(requests.get("cpu", limits.get("cpu", DEFAULT_CPU))),
        memory=str(requests.get("memory", limits.get("memory", DEFAULT_MEMORY))),
    )


def env_vars(container: Mapping[str, Any], plain_ok: frozenset[str] = frozenset()) -> dict[str, EnvEntry]:
    """The container's ``env`` as spec entries: values, and Secret keys as references."""
    env: dict[str, EnvEntry] = {}
    for entry in container.get("env") or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry["name"])
        source = entry.get("valueFrom")
        if source is None and "value" in entry:
            value = str(entry["value"])
            env[name] = EnvVar(value=value, not_secret=True) if name in plain_ok else value
        elif isinstance(source, dict) and isinstance(source.get("secretKeyRef"), dict):
            ref = source["secretKeyRef"]
            env[name] = EnvVar(secret_ref=SecretKeyRef(name=str(ref.get("name", "")), key=str(ref.get("key", "")),
                                                       optional=bool(ref.get("optional"))))
    return env


def env_from_secrets(container: Mapping[str, Any]) -> list[EnvFromSecret]:
    """The container's ``envFrom`` Secrets (config maps are not carried)."""
    sources: list[EnvFromSecret] = []
    for entry in container.get("envFrom") or []:
        ref = entry.get("secretRef") if isinstance(entry, dict) else None
        if isinstance(ref, dict):
            sources.append(EnvFromSecret(secret_ref=SecretRef(name=str(ref.get("name", "")),
                                                              optional=bool(ref.get("optional"))),
                                         prefix=entry.get("prefix") or None))
    return sources


# -- the pod's request, as the scheduler computes it -------------------------------------------------

_RESOURCES = ("cpu", "memory", GPU_RESOURCE)


def _container_request(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one container asks for: each resource's request, else its limit (Kubernetes defaults a missing
    request to the limit). Only resources the container states are present."""
    res = container.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    found: dict[str, Decimal] = {}
    for name in _RESOURCES:
        value = requests.get(name, limits.get(name))
        if value is not None:
            found[name] = parse_quantity(value)
    return found


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def pod_request(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """The pod's effective request per resource (``cpu`` in cores, ``memory`` in bytes, ``nvidia.com/gpu``),
    as the kube-scheduler computes it:

    - the sum over ``containers`` plus the restartable init containers (sidecars, ``restartPolicy: Always``),
      which run beside them;
    - at least, for each other init container, its own request plus the sidecars declared before it (init
      containers run one at a time);
    - plus ``overhead`` (the RuntimeClass's);
    - pod-level ``resources`` (``spec.resources``), when it states a resource, instead of the containers'.

    Only resources some container (or the pod) states are present in the answer."""
    total: dict[str, Decimal] = {}
    for container in pod.get("containers") or []:
        if isinstance(container, dict):
            _add(total, _container_request(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in pod.get("initContainers") or []:
        if not isinstance(container, dict):
            continue
        request = _container_request(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, request)
            _add(total, request)
            continue
        during = dict(sidecars)
        _add(during, request)
        for name, value in during.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), value)
    effective = {name: max(total.get(name, Decimal(0)), init_peak.get(name, Decimal(0)))
                 for name in {*total, *init_peak}}
    pod_level = pod.get("resources") or {}
    stated = {**(pod_level.get("limits") or {}), **(pod_level.get("requests") or {})}
    for name in ("cpu", "memory"):
        if name in stated:
            effective[name] = parse_quantity(stated[name])
    _add(effective, {name: parse_quantity(v) for name, v in (pod.get("overhead") or {}).items() if name in _RESOURCES})
    return effective


def _cpu_text(cores: Decimal) -> str:
    millis = int((cores * 1000).to_integral_value(rounding=ROUND_CEILING))
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


_MEMORY_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("T", 10**12), ("G", 10**9), ("Mi", 2**20), ("M", 10**6),
                 ("Ki", 2**10), ("k", 10**3))


def _memory_text(quantity: Decimal) -> str:
    whole = int(quantity.to_integral_value(rounding=ROUND_CEILING))
    for unit, size in _MEMORY_UNITS:
        if whole and whole % size == 0:
            return f"{whole // size}{unit}"
    return str(whole)


def pod_resources(pod: Mapping[str, Any]) -> ResourceRequest:
    """The pod's resources (``pod_request``): GPUs from ``nvidia.com/gpu``, the GPU type from the node selector
    ``muster.dev/gpu-type``; CPU and memory the spec's defaults when no container states them."""
    request = pod_request(pod)
    node_selector = pod.get("nodeSelector") or {}
    return ResourceRequest(
        gpus=int(request.get(GPU_RESOURCE, Decimal(0))),
        gpu_type=node_selector.get(GPU_TYPE),
        cpu=_cpu_text(request["cpu"]) if "cpu" in request else DEFAULT_CPU,
        memory=_memory_text(request["memory"]) if "memory" in request else DEFAULT_MEMORY,
    )


def pod_spec_of(template: Mapping[str, Any]) -> KubeObject:
    """The ``PodSpec`` of a ``PodTemplateSpec`` (or of a Pod)."""
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def first_container(pod: Mapping[str, Any]) -> KubeObject | None:
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    return containers[0] if containers else None


def pod_template(pod: Mapping[str, Any], plain_ok: frozenset[str] = frozenset()) -> PodTemplate:
    """The ``PodTemplate`` a ``PodSpec`` describes: its first container's image, command, arguments,
    environment and working directory; the pod's resources (``pod_resources``); security over every
    container. Raises ``ValueError`` when the pod has no containers, pydantic's ``ValidationError`` when a
    value does not fit the spec."""
    container = first_container(pod)
    if container is None:
        raise ValueError("the pod template has no containers")
    return PodTemplate(
        image=str(container.get("image") or ""),
        command=[str(a) for a in container.get("command") or []],
        args=[str(a) for a in container.get("args") or []],
        env=env_vars(container, plain_ok),
        env_from=env_from_secrets(container),
        resources=pod_resources(pod),
        working_dir=container.get("workingDir"),
        security=security(pod),
    )


def scheduling_gates(pod: Mapping[str, Any]) -> list[str]:
    """The names of a ``PodSpec``'s scheduling gates, in order."""
    return [str(g.get("name", "")) for g in pod.get("schedulingGates") or [] if isinstance(g, dict)]
