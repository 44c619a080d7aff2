"""The body of ``POST /v1/jobs``: a job spec (``schemas.jobspec.JobSpec``) whose ``roles`` may be left out
beside ``workload.manifest``. Before the spec is validated, the gateway reads the manifest's roles
(``services.spec.workload_spec``) and fills them in, and the spec's name when it gives none (the manifest's
``metadata.name``, a pod list's group label or first pod), and ``workload.api_version``/``kind`` when only the
manifest says them. So a client may send

    {"queue": "team-a", "workload": {"api_version": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                     "manifest": {...the JobSet...}}}

and the job is queued with the JobSet's roles. A spec that does give roles beside a manifest must give the
manifest's own (``submission_rules.check_spec``: 422 ``roles_do_not_match_workload``; a role's ``topology`` may be
added): a tenant cannot declare fewer GPUs than its object asks for.

A bare Kubernetes object is not a body of this route: the spec is the one API (its queue, priority, and
the rest of its fields); ``muster submit FILE`` and the Python client wrap an object into one.

A manifest whose roles cannot be read answers 422 ``workload_not_queueable`` (field
``spec.workload.manifest``), with the reason. A kind whose roles need other objects of the cluster (a
TrainJob's training runtime, which the gateway does not read) must come with its roles; the dispatcher
compares them with the object it creates.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from schemas.jobspec import JobSpec
from services.gateway.errors import ApiError
from services.spec.kinds import NotQueueable, kind_for, kind_of
from services.spec.workload_spec import (
    WORKLOAD_NOT_QUEUEABLE,
    manifest_object,
    object_meta,
    workload_manifest,
    workload_roles,
)

MANIFEST_FIELD = "spec.workload.manifest"


def _refused(reason: str) -> ApiError:
    return ApiError(422, WORKLOAD_NOT_QUEUEABLE, reason, field=MANIFEST_FIELD)


def with_workload_roles(data: Any) -> Any:
    """The request body with the roles of its workload manifest filled in (see the module); any other body as
    it is. ``ApiError`` 422 ``workload_not_queueable`` when the manifest's roles cannot be read."""
    if not isinstance(data, dict):
        return data
    workload = data.get("workload")
    if not isinstance(workload, dict) or not isinstance(workload.get("manifest"), dict):
        return data
    manifest: dict[str, Any] = workload["manifest"]
    if "api_version" not in workload and "kind" not in workload and isinstance(manifest.get("apiVersion"), str):
        listed = manifest.get("kind") == "List"
        workload = {**workload, "api_version": "v1" if listed else manifest["apiVersion"],
                    "kind": "Pod" if listed else manifest.get("kind")}
        data = {**data, "workload": workload}
    api_version, kind_name = workload.get("api_version"), workload.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind_name, str):
        return data  # the spec's validation names the missing field
    obj = manifest_object(api_version, kind_name, manifest)
    if obj.get("kind") != "List" and (obj.get("apiVersion"), obj.get("kind")) != (api_version, kind_name):
        return data  # WorkloadObject's validation says that the manifest is another kind
    declared = bool(data.get("roles")) or data.get("template") is not None
    try:
        if not data.get("name"):
            data = {**data, "name": object_meta(obj).name}
        if declared:
            return data  # checked against the manifest after validation (submission_rules.check_spec)
        kind = kind_of(obj) if obj.get("kind") == "List" else kind_for(api_version, kind_name)
        references = kind.references(obj)
        if references:
            raise _refused(f"the roles of {kind_name} come from {', '.join(map(str, references))}, which the "
                           "gateway does not read: give roles (`muster submit FILE --related RUNTIME_FILE` reads them)")
        roles = workload_roles(obj)
        if obj.get("kind") == "List":  # a pod list gets its group label and size, as every reader needs
            data = {**data, "workload": {**workload, "manifest": workload_manifest(obj)}}
    except NotQueueable as exc:
        raise _refused(exc.reason) from None
    return {**data, "roles": [r.model_dump(mode="json") for r in roles]}


#: the body of ``POST /v1/jobs`` (the OpenAPI document shows ``JobSpec``)
JobSubmission = Annotated[JobSpec, BeforeValidator(with_workload_roles)]
