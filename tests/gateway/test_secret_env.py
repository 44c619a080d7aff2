"""Secrets at the gateway: plain values that look like secrets are refused (HTTP, recurring definitions,
kube-native Jobs), references to Kubernetes Secrets pass through, and nobody reads another tenant's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from schemas.intents import SubmitJob
from schemas.jobspec import EnvFromSecret, EnvVar, SecretKeyRef
from schemas.topics import INTENTS_TOPIC
from services.gateway.kube_jobs import NotSubmittable, spec_from_job, submission_from_job
from tests.gateway.builders import T0, Harness, KubeJobsHandled, auth, simulated_cluster, spec_json

ROOT = Path(__file__).resolve().parents[2]
SECRET_VALUE = "hf_s3cr3t-value-1234"


def _with_env(env: dict[str, Any], **changes: Any) -> dict[str, Any]:
    body = spec_json(**changes)
    body["template"]["env"] = env
    return body


async def test_a_plain_secret_is_refused_with_what_to_do_and_nothing_is_published(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    r = await client.post("/v1/jobs", json=_with_env({"LR": "0.1", "HF_TOKEN": SECRET_VALUE}), headers=auth("alice"))
    assert r.status_code == 422
    body = r.json()
    assert (body["error"], body["field"]) == ("plain_secret_env", "spec.template.env.HF_TOKEN")
    assert "secret_ref" in body["detail"] and "not_secret: true" in body["detail"]
    assert SECRET_VALUE not in r.text
    assert gw.publisher.sent == []


async def test_every_offending_entry_is_named(client: httpx.AsyncClient) -> None:
    env = {"HF_TOKEN": SECRET_VALUE, "DATABASE_URL": "postgres://u:pw@db/x", "LR": "0.1"}
    body = (await client.post("/v1/jobs", json=_with_env(env), headers=auth("alice"))).json()
    assert body["field"] == "spec.template.env.HF_TOKEN" and "DATABASE_URL" in body["detail"]
    assert "LR" not in body["detail"].split("(so do")[1]


async def test_references_and_marked_values_are_accepted(client: httpx.AsyncClient, gw: Harness) -> None:
    env = {"HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}},
           "SORT_KEY": {"value": "date", "not_secret": True}, "LR": "0.1"}
    body = _with_env(env)
    body["template"]["env_from"] = [{"secret_ref": {"name": "wandb"}}]
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    assert sent.spec.template.env["HF_TOKEN"] == EnvVar(secret_ref=SecretKeyRef(name="hf", key="token"))
    assert sent.spec.template.secret_names() == ["hf", "wandb"]


async def test_a_recurring_definition_is_held_to_the_same_rule(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.post("/v1/jobs", json=_with_env({"WANDB_API_KEY": "abc"}, name="nightly",
                                                     schedule="0 2 * * *"), headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (422, "spec.template.env.WANDB_API_KEY")
    assert gw.publisher.sent == []


async def test_another_tenant_never_reads_a_spec(client: httpx.AsyncClient, gw: Harness) -> None:
    env = {"CONFIG": "plain-but-private", "HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}}}
    job_id = (await client.post("/v1/jobs", json=_with_env(env), headers=auth("alice"))).json()["job_id"]
    own = await client.get(f"/v1/dashboard/jobs/{job_id}", headers=auth("alice"))
    assert own.status_code == 200 and own.json()["spec"]["template"]["env"]["CONFIG"] == "plain-but-private"
    for path in (f"/v1/dashboard/jobs/{job_id}", f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/explain",
                 f"/v1/jobs/{job_id}/events"):
        other = await client.get(path, headers=auth("bob"))
        assert other.status_code == 404 and "plain-but-private" not in other.text, path
    for path in ("/v1/jobs", "/v1/dashboard/jobs"):
        listed = await client.get(path, headers=auth("bob"))
        assert listed.status_code == 200 and job_id not in listed.text, path
    # the views of a job other than the dashboard's detail carry no spec at all
    for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/explain"):
        assert "plain-but-private" not in (await client.get(path, headers=auth("alice"))).text


# ---------------------------------------------------------------- kube-native Jobs


def kube_job(env: list[dict[str, Any]], env_from: list[dict[str, Any]] | None = None,
             **annotations: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "jobs" / "kube-job.yaml").read_text(encoding="utf-8"))
    obj["metadata"].update({"uid": "0f3c-uid", "resourceVersion": "7"})
    obj["metadata"]["annotations"].update(annotations)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["env"] = env
    if env_from is not None:
        container["envFrom"] = env_from
    return obj


def test_kube_native_secret_key_refs_travel_as_references() -> None:
    spec = spec_from_job(kube_job(
        [{"name": "LR", "value": "0.1"},
         {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
         {"name": "S3_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "k", "optional": True}}},
         {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
         {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}}],
        [{"secretRef": {"name": "wandb"}, "prefix": "WANDB_"}, {"configMapRef": {"name": "cfg"}}]))
    env = spec.template.env
    assert env["LR"] == "0.1"
    assert env["HF_TOKEN"] == EnvVar(secret_ref=SecretKeyRef(name="hf", key="token"))
    assert env["S3_KEY"] == EnvVar(secret_ref=SecretKeyRef(name="s3", key="k", optional=True))
    assert "NODE" not in env and "MODE" not in env  # the Job runs as written; these are not carried
    assert spec.template.env_from == [EnvFromSecret.model_validate({"secret_ref": {"name": "wandb"},
                                                                    "prefix": "WANDB_"})]


def test_kube_native_submission_carries_references_and_no_values(gw: Harness) -> None:
    obj = kube_job([{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}])
    submission = submission_from_job(obj, gw.ctx.config, T0)
    wire = submission.model_dump_json()
    assert '"secret_ref":{"name":"hf","key":"token"}' in wire


def test_a_kube_native_plain_secret_is_refused_unless_the_annotation_names_it(gw: Harness) -> None:
    env = [{"name": "HF_TOKEN", "value": SECRET_VALUE}, {"name": "SORT_KEY", "value": "date"}]
    with pytest.raises(NotSubmittable, match=r"HF_TOKEN, SORT_KEY.*valueFrom\.secretKeyRef") as info:
        submission_from_job(kube_job(env), gw.ctx.config, T0)
    assert SECRET_VALUE not in str(info.value)
    with pytest.raises(NotSubmittable, match="env HF_TOKEN:"):
        submission_from_job(kube_job(env, **{"muster.dev/plain-env": "SORT_KEY"}), gw.ctx.config, T0)
    submission = submission_from_job(kube_job(env, **{"muster.dev/plain-env": "SORT_KEY, HF_TOKEN"}),
                                     gw.ctx.config, T0)
    assert submission.spec.template.env["SORT_KEY"] == EnvVar(value="date", not_secret=True)


def test_the_cli_refuses_a_plain_secret_with_what_to_do(tmp_path: Path, served: tuple[Harness, dict[str, str]]
                                                       ) -> None:
    from click.testing import CliRunner

    from services.cli.jobs import submit

    gw, env = served
    spec = spec_json()
    spec["template"]["env"] = {"HF_TOKEN": SECRET_VALUE}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = CliRunner().invoke(submit, [str(path)], env=env)
    assert result.exit_code != 0
    assert "spec.template.env.HF_TOKEN" in result.output and "secret_ref" in result.output
    assert SECRET_VALUE not in result.output
    assert gw.publisher.sent == []


async def test_a_refused_kube_native_job_tells_its_owner_why_on_the_job(gw: Harness,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """On a simulated cluster: a labelled Job with a plain HF_TOKEN is not submitted, and a Warning Event
    ``NotSubmitted`` on it (one per generation of the Job, however many replicas see it and however often its
    status changes) says to use a secretKeyRef."""
    import asyncio

    from services.gateway.kube_jobs import watch_kube_jobs
    from services.runtime.kube import EVENTS, JOBS, create_or_get
    from tests.kubesim.builders import eventually

    seen = KubeJobsHandled(monkeypatch)
    async with simulated_cluster() as (url, rest):
        job = kube_job([{"name": "HF_TOKEN", "value": SECRET_VALUE}])
        for key in ("uid", "resourceVersion"):
            del job["metadata"][key]
        stop = asyncio.Event()
        watchers = [asyncio.create_task(watch_kube_jobs(gw.ctx, url, stop)) for _ in range(2)]  # two replicas
        try:
            await create_or_get(rest, JOBS, job)
            # both replicas have handled the Job as it now is, after the Job controller's status change, and
            # so have written (or found already written) every refusal they will write
            name = job["metadata"]["name"]
            await eventually(lambda: seen.settled(rest, "team-a", name, replicas=2), within=30,
                             what="both replicas handled the Job as it now is")
        finally:
            stop.set()
            await asyncio.gather(*watchers)
        items, _ = await rest.list(EVENTS, "team-a")
    refused = gw.registry.get_sample_value("muster_gateway_submissions_total", {"source": "kube", "outcome": "refused"})
    assert (refused or 0) >= 2  # each replica refused it
    [event] = [e for e in items if e.get("reason") == "NotSubmitted"]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "resnet-sweep-7"
    assert "HF_TOKEN" in event["message"] and "valueFrom.secretKeyRef" in event["message"]
    assert SECRET_VALUE not in event["message"]
    assert gw.publisher.on(INTENTS_TOPIC) == []
