"""Secrets in the rendered Job: references become ``valueFrom.secretKeyRef`` and ``envFrom.secretRef``; the
manifest is a valid Kubernetes object and holds no secret value."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import orjson

from schemas.jobspec import EnvFromSecret, JobSpec, SecretKeyRef
from services.dispatcher.plans import DispatchSettings, admission_manifest, clone_manifest
from services.dispatcher.render import render_job
from tests.builders.jobspecs import job_spec
from tests.dispatcher.builders import TRAINING, admitted, runs_for
from tests.kube.builders import placement, template

K8S_VERSION = "1.30"


def _container(manifest: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = manifest["spec"]["template"]["spec"]["containers"][0]
    return container


def test_references_render_as_secret_key_refs_and_env_from() -> None:
    tpl = template(env={"LR": "0.1", "HF_TOKEN": SecretKeyRef(name="hf", key="token"),
                        "DB_PASSWORD": SecretKeyRef(name="db.creds", key="password", optional=True)},
                   env_from=(EnvFromSecret.model_validate({"secret_ref": {"name": "wandb"}, "prefix": "WANDB_"}),
                             EnvFromSecret.model_validate({"secret_ref": {"name": "s3", "optional": True}})))
    job = render_job(tpl, 1, placement(("east-a100-0", 2)))
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    container = _container(job)
    env = {e["name"]: e for e in container["env"]}
    assert env["LR"] == {"name": "LR", "value": "0.1"}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    assert env["DB_PASSWORD"] == {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "db.creds", "key": "password", "optional": True}}}
    assert env["MUSTER_JOB_ID"]["value"] == "train-1"  # Muster's own entries as before
    assert container["envFrom"] == [{"secretRef": {"name": "wandb"}, "prefix": "WANDB_"},
                                    {"secretRef": {"name": "s3", "optional": True}}]


def test_no_env_from_without_secrets() -> None:
    job = render_job(template(env={"LR": "0.1"}), 1, placement(("east-a100-0", 2)))
    assert "envFrom" not in _container(job)


def test_a_reference_cannot_override_musters_own_entries() -> None:
    job = render_job(template(env={"MUSTER_JOB_ID": SecretKeyRef(name="x", key="y")}), 1,
                     placement(("east-a100-0", 2)))
    [entry] = [e for e in _container(job)["env"] if e["name"] == "MUSTER_JOB_ID"]
    assert entry == {"name": "MUSTER_JOB_ID", "value": "train-1"}


def test_an_admitted_spec_with_references_becomes_a_valid_job_without_secret_values() -> None:
    base = job_spec(**TRAINING, annotations=runs_for(30.0))
    spec = JobSpec.model_validate({**base.model_dump(mode="json"), "template": {
        **base.template.model_dump(mode="json"),
        "env": {"EPOCHS": "3", "SORT_KEY": {"value": "date", "not_secret": True},
                "HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}}},
        "env_from": [{"secret_ref": {"name": "wandb"}}]}})
    manifest = admission_manifest(admitted("train-21", job_spec=spec), "evt-1", "c", DispatchSettings())
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    container = _container(manifest)
    env = {e["name"]: e for e in container["env"]}
    assert env["EPOCHS"]["value"] == "3" and env["SORT_KEY"] == {"name": "SORT_KEY", "value": "date"}
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert container["envFrom"] == [{"secretRef": {"name": "wandb"}}]
    assert manifest["metadata"]["namespace"] == "team-a"  # the Secret is read in the job's own namespace
    # a restart or rescale copies the Job, references included
    served = {**manifest, "metadata": {**manifest["metadata"], "uid": "u", "resourceVersion": "1"}}
    clone = clone_manifest(served, name="train-21-a0-r1", revision=1, restarts=0, decision_event="e")
    assert _container(clone)["env"] == container["env"] and _container(clone)["envFrom"] == container["envFrom"]
    assert b"not_secret" not in orjson.dumps(manifest)
