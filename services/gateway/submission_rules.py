"""Admission rules at the door, pure: who may submit where, what a spec may ask for, which id it gets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from schemas.config import ClusterConfig, QueueConfig, gpu_resource, is_gpu_resource
from schemas.jobspec import DependencySpec, JobSpec, SecuritySpec
from schemas.status import JobStatusChanged
from services.gateway.auth import Principal
from services.gateway.errors import ApiError
from services.gateway.submissions import RecentSubmissions, spec_digest
from services.gateway.views import ConfigView, StatusView
from services.spec.ids import keyed_job_id, untagged_keyed_job_id, with_tenant_tag
from services.spec.preemptibility import NON_PREEMPTIBLE_NOT_ALLOWED, non_preemptible_refusal
from services.spec.roles import roles_refusal
from services.spec.secret_env import plain_secret_errors
from services.spec.workload_spec import WORKLOAD_NOT_QUEUEABLE, roles_mismatch

PLAIN_SECRET_ENV = "plain_secret_env"

_ELEVATED_FIELDS = ("privileged", "run_as_root", "host_network", "host_pid", "host_ipc", "host_path_volumes")


def elevated_fields(security: SecuritySpec) -> list[str]:
    """The security fields a spec sets beyond the defaults."""
    return [name for name in _ELEVATED_FIELDS if getattr(security, name)]


def check_security(spec: JobSpec, queue: QueueConfig, *, field_prefix: str = "spec") -> None:
    """403 naming the first elevated field (of any role) unless the queue allows privileged work."""
    if queue.allow_privileged:
        return
    templates = [("template", spec.template)] if spec.template is not None else [
        (f"roles[{i}].template", r.template) for i, r in enumerate(spec.roles)]
    for where, template in templates:
        fields = elevated_fields(template.security)
        if fields:
            raise ApiError(403, "privileged_not_allowed",
                           f"queue {queue.name!r} does not allow {', '.join(fields)}",
                           field=f"{field_prefix}.{where}.security.{fields[0]}")


def check_preemptibility(tenant: str, priority_class: str, config: ConfigView, *, preemptible: bool = True,
                         field_prefix: str = "spec") -> None:
    """403 naming the rule when the work would be non-preemptible and the tenant is not allowed to run such."""
    refusal = non_preemptible_refusal(tenant, config.tenant(tenant), preemptible=preemptible,
                                      priority_class=priority_class, class_config=config.priority_class(priority_class))
    if refusal is not None:
        field, message = refusal
        raise ApiError(403, NON_PREEMPTIBLE_NOT_ALLOWED, message, field=f"{field_prefix}.{field}")


def queue_for_submission(spec: JobSpec, principal: Principal, config: ConfigView) -> QueueConfig:
    """The spec's queue if the principal may submit to it: 422 unknown queue, 403 another tenant's queue."""
    queue = config.queue(spec.queue)
    if queue is None:
        raise ApiError(422, "unknown_queue", f"no queue named {spec.queue!r}", field="spec.queue")
    if not principal.owns(queue.tenant):
        raise ApiError(403, "forbidden", f"queue {spec.queue!r} belongs to another tenant", field="spec.queue")
    return queue


def check_spec(spec: JobSpec, queue: QueueConfig, config: ConfigView) -> None:
    """Rules that need the configuration: known priority class, security policy, who may run
    non-preemptible work and that such work fits its queue's nominal quota; and that a job of several roles
    names its workload object, whose manifest (when given) makes the roles declared
    (``workload_spec.roles_mismatch``: 422 ``roles_do_not_match_workload``, ``workload_not_queueable``)."""
    refusal = roles_refusal(spec) or roles_mismatch(spec)
    if refusal is not None:
        field = "spec.workload.manifest" if refusal[0] == WORKLOAD_NOT_QUEUEABLE else "spec.roles"
        raise ApiError(422, refusal[0], refusal[1], field=field)
    if not config.has_priority_class(spec.priority_class):
        raise ApiError(422, "unknown_priority_class", f"no priority class named {spec.priority_class!r}",
                       field="spec.priority_class")
    check_security(spec, queue)
    check_preemptibility(queue.tenant, spec.priority_class, config, preemptible=spec.preemptible)
    check_nominal_fit(spec, queue, config)


def check_env(spec: JobSpec, *, field_prefix: str = "spec") -> None:
    """422 ``plain_secret_env`` when an environment entry looks like a secret (by name, or a URL with a
    password) but carries a plain value: the spec travels in clear text on Muster's topics, so a secret must be
    a ``secret_ref`` to a Kubernetes Secret. An entry marked ``not_secret`` passes."""
    found = plain_secret_errors(spec, field_prefix)
    if not found:
        return
    detail = found[0]["detail"]
    if len(found) > 1:
        detail += f" (so do {', '.join(e['field'].rsplit('.', 1)[-1] for e in found[1:])})"
    raise ApiError(422, PLAIN_SECRET_ENV, detail, field=found[0]["field"])


def with_growth(sizes: Mapping[tuple[str, str], Mapping[int, int]],
                clusters: Iterable[ClusterConfig]) -> dict[tuple[str, str], dict[int, int]]:
    """``sizes`` (observed nodes) with the nodes growable groups may still add (``autoscale.max`` less the group's
    starting count): a job that fits only once its cluster grows is accepted, and waits for that."""
    out = {shape: dict(by_size) for shape, by_size in sizes.items()}
    for cluster in clusters:
        for group in cluster.node_groups:
            if group.autoscale is None or group.whole_gpus == 0:
                continue
            by_size = out.setdefault((cluster.name, group.gpu_type), {})
            by_size[group.whole_gpus] = by_size.get(group.whole_gpus, 0) + max(group.autoscale.max - group.count, 0)
    return out


def check_capacity(spec: JobSpec, sizes: Mapping[tuple[str, str], Mapping[int, int]]) -> None:
    """422 ``no_matching_nodes`` for a job no known cluster could ever host, whatever else runs: its GPU
    type is on no node, or no single cluster has room for its (smallest) gang on empty nodes. Selectors
    and taints are left to the scheduler; with no nodes known yet, or ``allow_future_capacity``, the job
    is accepted. ``sizes``: (cluster, GPU type) -> GPUs per node -> how many such nodes. A job of several
    roles is judged by its main role (the scheduler checks the whole gang against the nodes)."""
    res = spec.resources
    if res.gpus == 0 or spec.allow_future_capacity or not sizes:
        return
    pods = spec.main_min_replicas or spec.main_replicas
    main = "spec" if not spec.roles else f"spec.roles[{spec.roles.index(spec.main_role())}]"
    template = "spec.template" if not spec.roles else f"{main}.template"
    usable = {shape: count for shape, count in sizes.items()
              if (not res.gpu_type or shape[1] == res.gpu_type) and (spec.cluster is None or shape[0] == spec.cluster)}
    where = f" in cluster {spec.cluster!r}" if spec.cluster is not None else ""
    if not usable:
        known = ", ".join(sorted({t for _, t in sizes}))
        raise ApiError(422, "no_matching_nodes", f"no node{where} has GPU type {res.gpu_type!r} (known: {known}); "
                       "set allow_future_capacity to queue it for capacity still to come",
                       field=f"{template}.resources.gpu_type")
    fits: dict[str, int] = {}
    for (cluster, _), by_size in usable.items():
        fits[cluster] = fits.get(cluster, 0) + sum(count * (size // res.gpus) for size, count in by_size.items())
    if max(fits.values()) < pods:
        raise ApiError(422, "no_matching_nodes",
                       f"no cluster{where} can ever host {pods} pods of {res.gpus} GPU(s) {res.gpu_type or ''}: at "
                       f"most {max(fits.values())} fit on its empty nodes; set allow_future_capacity to queue it "
                       "for capacity still to come", field=f"{main}.replicas")


EXCEEDS_NOMINAL_QUOTA = "exceeds_nominal_quota"


def check_nominal_fit(spec: JobSpec, queue: QueueConfig, config: ConfigView) -> None:
    """422 ``exceeds_nominal_quota`` for work that cannot be preempted and asks more GPUs (at its smallest
    size) than its queue's nominal quota of its GPU type: such work never runs on borrowed quota, so it would
    wait for ever. Accepted with ``allow_future_capacity`` (quota still to come)."""
    if spec.allow_future_capacity or (spec.preemptible and _class_preemptible(spec, config)):
        return
    gpus = spec.gpus_charged_at(spec.main_min_replicas or spec.main_replicas)
    if gpus <= 0:
        return
    gpu_type = spec.resources.gpu_type
    keys = [gpu_resource(gpu_type)] if gpu_type else [k for k in queue.quotas if is_gpu_resource(k)]
    nominal = max((queue.quotas[k].nominal for k in keys if k in queue.quotas), default=0)
    if gpus > nominal:
        kind = f"{gpu_type} GPUs" if gpu_type else "GPUs of any one type"
        main = "spec" if not spec.roles else f"spec.roles[{spec.roles.index(spec.main_role())}]"
        raise ApiError(422, EXCEEDS_NOMINAL_QUOTA,
                       f"the job cannot be preempted, so it runs only within its queue's nominal quota, and queue "
                       f"{queue.name!r} has {nominal} {kind} where the job needs {gpus:g}: it would wait for ever. "
                       "Make it smaller or preemptible, or set allow_future_capacity to queue it for quota still "
                       "to come", field=f"{main}.replicas")


def _class_preemptible(spec: JobSpec, config: ConfigView) -> bool:
    priority_class = config.priority_class(spec.priority_class)
    return priority_class is None or priority_class.preemptible


def resolve_dependencies(spec: JobSpec, tenant: str, status: StatusView, recent: RecentSubmissions) -> JobSpec:
    """The spec with every ``after`` entry naming a job id of ``tenant``: an id stays, a name becomes the
    tenant's latest job of that name. 422 for a job the tenant has not got (another tenant's job is
    answered the same way, so that its existence is not revealed)."""
    if not spec.after:
        return spec
    latest: dict[str, tuple[datetime, str]] = {}  # name -> (submitted at, job id), the tenant's jobs only
    ids: set[str] = set()
    for job_id, owner, name, at in [
        *((s.job_id, s.tenant, s.name, s.submitted_at) for s in status.jobs()),
        *((e.submission.job_id, e.submission.tenant, e.submission.spec.name, e.submission.submitted_at)
          for e in recent.all()),
    ]:
        if owner != tenant:
            continue
        ids.add(job_id)
        if name not in latest or (at, job_id) > latest[name]:
            latest[name] = (at, job_id)
    resolved: list[DependencySpec] = []
    for i, dep in enumerate(spec.after):
        if dep.job in ids:
            job_id = dep.job
        elif dep.job in latest:
            job_id = latest[dep.job][1]
        else:
            raise ApiError(422, "unknown_dependency", f"no job with id or name {dep.job!r} in tenant {tenant!r}",
                           field=f"spec.after.{i}.job")
        if all(d.job != job_id for d in resolved):
            resolved.append(dep.model_copy(update={"job": job_id}))
    return spec.model_copy(update={"after": resolved})


@dataclass(frozen=True, slots=True)
class SubmissionPlan:
    """Which id a submission gets, whether it is new (publish it) or a retry of a known job, and the spec
    to publish (its dependencies resolved to job ids)."""

    job_id: str
    tenant: str
    new: bool
    spec: JobSpec


def plan_submission(
    spec: JobSpec,
    principal: Principal,
    idempotency_key: str | None,
    config: ConfigView,
    status: StatusView,
    recent: RecentSubmissions,
    fresh_id: Callable[[str], str],
    sizes: Mapping[tuple[str, str], Mapping[int, int]] | None = None,
) -> SubmissionPlan:
    """Authorise and validate ``spec``; decide its job id, which carries the tenant's tag (``fresh_id`` gives a
    fresh id from a name, tagged here). Raises ``ApiError`` (403, 409, 422)."""
    queue = queue_for_submission(spec, principal, config)
    check_spec(spec, queue, config)
    check_env(spec)
    check_capacity(spec, sizes or {})
    tenant = queue.tenant
    spec = resolve_dependencies(spec, tenant, status, recent)
    if idempotency_key is None:
        return SubmissionPlan(with_tenant_tag(fresh_id(spec.name), tenant), tenant, True, spec)
    earlier = recent.by_key(tenant, idempotency_key)
    if earlier is not None:
        if earlier.digest != spec_digest(spec):
            raise ApiError(409, "idempotency_key_reused",
                           f"key already used for job {earlier.submission.job_id} with a different spec",
                           field="Idempotency-Key")
        return SubmissionPlan(earlier.submission.job_id, tenant, False, spec)
    job_id = keyed_job_id(spec.name, tenant, idempotency_key)
    known = _keyed_job(status, tenant, job_id, untagged_keyed_job_id(spec.name, tenant, idempotency_key))
    if known is None:
        return SubmissionPlan(job_id, tenant, True, spec)
    if known.tenant != tenant:
        # the tenant's own id, held by another tenant's job: only a forgery can have made it; say nothing of it
        raise ApiError(409, "idempotency_key_reused", f"key {idempotency_key!r} cannot be used: choose another",
                       field="Idempotency-Key")
    if (known.queue, known.name) != (spec.queue, spec.name):
        raise ApiError(409, "idempotency_key_reused",
                       f"key already used for job {known.job_id} in queue {known.queue!r}", field="Idempotency-Key")
    return SubmissionPlan(known.job_id, tenant, False, spec)


def _keyed_job(status: StatusView, tenant: str, job_id: str, untagged: str) -> JobStatusChanged | None:
    """The job a keyed submission names: its id's, or (the tenant's only) the one the key named before ids
    carried a tenant tag; None when neither is known."""
    known = status.get(job_id)
    if known is not None:
        return known
    earlier = status.get(untagged)
    return earlier if earlier is not None and earlier.tenant == tenant else None
