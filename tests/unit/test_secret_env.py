"""Secrets in a job spec: environment entries that refer to Kubernetes Secrets, older specs that still decode,
and the rule that finds plain values looking like secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from pydantic import ValidationError

from schemas.codec import decode, encode
from schemas.envelope import make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import EnvFromSecret, EnvVar, JobSpec, PodTemplate, SecretKeyRef
from schemas.topics import INTENTS_TOPIC
from services.spec.secret_env import plain_secret_errors, plain_secrets, secret_like_name, secret_like_value
from tests.builders.messages import example_messages


def _template(**env: Any) -> PodTemplate:
    return PodTemplate(image="registry.example/train:1", env=env)


def test_an_entry_is_a_value_or_a_reference_to_a_secret_key() -> None:
    tpl = _template(LR="0.1", HF_TOKEN={"secret_ref": {"name": "hf", "key": "token"}},
                    SORT_KEY={"value": "date", "not_secret": True},
                    DB_PASSWORD={"secret_ref": {"name": "db.creds", "key": "password", "optional": True}})
    assert tpl.env["LR"] == "0.1"
    assert tpl.env["HF_TOKEN"] == EnvVar(secret_ref=SecretKeyRef(name="hf", key="token"))
    assert tpl.plain_env() == {"LR": "0.1", "SORT_KEY": "date"}
    assert tpl.secret_env() == {"HF_TOKEN": SecretKeyRef(name="hf", key="token"),
                                "DB_PASSWORD": SecretKeyRef(name="db.creds", key="password", optional=True)}
    assert tpl.secret_names() == ["db.creds", "hf"]
    # the JSON names only what was set: a reference has no value, defaults stay out
    assert tpl.model_dump(mode="json")["env"] == {
        "LR": "0.1", "HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}},
        "SORT_KEY": {"value": "date", "not_secret": True},
        "DB_PASSWORD": {"secret_ref": {"name": "db.creds", "key": "password", "optional": True}}}


def test_whole_secrets_as_env_from() -> None:
    tpl = PodTemplate(image="x", env_from=[{"secret_ref": {"name": "wandb"}, "prefix": "WANDB_"},
                                           {"secret_ref": {"name": "s3", "optional": True}}])
    assert tpl.env_from == [EnvFromSecret.model_validate({"secret_ref": {"name": "wandb"}, "prefix": "WANDB_"}),
                            EnvFromSecret.model_validate({"secret_ref": {"name": "s3", "optional": True}})]
    assert tpl.secret_names() == ["s3", "wandb"]
    assert tpl.model_dump(mode="json")["env_from"] == [{"secret_ref": {"name": "wandb"}, "prefix": "WANDB_"},
                                                      {"secret_ref": {"name": "s3", "optional": True}}]


@pytest.mark.parametrize(("entry", "where"), [
    ({}, "entry"),
    ({"value": "a", "secret_ref": {"name": "s", "key": "k"}}, "entry"),
    ({"secret_ref": {"name": "s", "key": "k"}, "not_secret": True}, "entry"),
    ({"secret_ref": {"name": "Not_A_Name", "key": "k"}}, "entry.secret_ref.name"),
    ({"secret_ref": {"name": "s", "key": "a/b"}}, "entry.secret_ref.key"),
    ({"secret_ref": {"name": "s"}}, "entry.secret_ref.key"),
    ({"secret_ref": {"name": "s", "key": "k"}, "resolved": "x"}, "entry.resolved"),
    ("a\x00b", "value"),
    (5, "value"),
])
def test_invalid_entries_name_the_form_and_field(entry: object, where: str) -> None:
    with pytest.raises(ValidationError) as info:
        PodTemplate(image="x", env={"E": entry})
    [error] = info.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == f"env.E.{where}"


def test_env_from_refuses_bad_names() -> None:
    with pytest.raises(ValidationError):
        PodTemplate(image="x", env_from=[{"secret_ref": {"name": "UPPER"}}])
    with pytest.raises(ValidationError):
        PodTemplate(image="x", env_from=[{"secret_ref": {"name": "ok"}, "prefix": "1BAD"}])


def test_older_messages_decode_and_encode_as_before() -> None:
    """A SubmitJob written before references existed (env a map of strings, no env_from) decodes, and encodes
    to the same JSON: digests and compacted topics do not change."""
    submit = next(m for m in example_messages() if isinstance(m, SubmitJob))
    old = submit.model_copy(update={"spec": submit.spec.model_copy(update={
        "template": submit.spec.template.model_copy(update={"env": {"LR": "0.1", "EPOCHS": "3"}})})})
    envelope = make_envelope(old, "pipeline")
    raw = encode(envelope)
    wire = orjson.loads(raw)
    template = wire["payload"]["spec"]["template"]
    assert template["env"] == {"LR": "0.1", "EPOCHS": "3"} and "env_from" not in template
    back = decode(raw, topic=INTENTS_TOPIC)
    assert back == envelope and encode(back) == raw


def test_references_travel_on_the_intents_topic_without_values() -> None:
    submit = next(m for m in example_messages() if isinstance(m, SubmitJob))
    spec = JobSpec.model_validate({**submit.spec.model_dump(mode="json"), "template": {
        "image": "x", "env": {"HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}}},
        "env_from": [{"secret_ref": {"name": "wandb"}}]}})
    envelope = make_envelope(submit.model_copy(update={"spec": spec}), "pipeline")
    back = decode(encode(envelope), topic=INTENTS_TOPIC)
    assert back == envelope
    assert back.payload.spec.template.secret_names() == ["hf", "wandb"]


@pytest.mark.parametrize("name", [
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "AWS_SESSION_TOKEN", "AWS_SECRET_ACCESS_KEY",
    "WANDB_API_KEY", "OPENAI_API_KEY", "NGC_API_KEY", "SSH_PRIVATE_KEY", "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD",
    "CLIENT_SECRET", "client_secret", "GCP_CREDENTIALS", "GITLAB_PAT", "GPG_PASSPHRASE", "KEY",
])
def test_names_that_look_like_secrets(name: str) -> None:
    assert secret_like_name(name)


@pytest.mark.parametrize("name", [
    "LR", "PWD", "OLDPWD", "MAX_TOKENS", "TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG",
    "AWS_ACCESS_KEY_ID", "AWS_REGION", "MASTER_ADDR", "SSH_AUTH_SOCK", "MONKEY", "KEYS_DIR",
])
def test_names_that_do_not(name: str) -> None:
    assert not secret_like_name(name)


def test_urls_with_passwords_are_secrets_whatever_the_name() -> None:
    assert secret_like_value("postgres://trainer:hunter2@db.example:5432/runs")
    assert secret_like_value("redis://:hunter2@cache:6379/0")
    assert not secret_like_value("https://user@git.example/repo.git")
    assert not secret_like_value("http://tracker.example:8080/runs")
    assert not secret_like_value("s3://bucket/path:with@signs")


def test_plain_secrets_are_found_and_the_opt_out_and_references_pass() -> None:
    tpl = _template(HF_TOKEN="hf_abc", LR="0.1", DATABASE_URL="postgres://u:pw@db/x", EMPTY_TOKEN="",
                    SORT_KEY={"value": "date", "not_secret": True},
                    WANDB_API_KEY={"value": "abc"},
                    DB_PASSWORD={"secret_ref": {"name": "db", "key": "password"}})
    found = plain_secrets(tpl)
    assert [(p.name, p.why) for p in found] == [
        ("HF_TOKEN", "its name"), ("DATABASE_URL", "its value holds a password in a URL"),
        ("WANDB_API_KEY", "its name")]


def test_errors_name_each_field_and_say_what_to_do() -> None:
    spec = JobSpec(name="t", queue="q", template=_template(HF_TOKEN="hf_abc"))
    [error] = plain_secret_errors(spec)
    assert error["field"] == "spec.template.env.HF_TOKEN"
    assert "secret_ref" in error["detail"] and "not_secret: true" in error["detail"]
    assert "hf_abc" not in error["detail"]  # the refusal never repeats the value


def test_the_example_refers_to_its_secrets_and_passes_the_rule() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "finetune-secrets.yaml"
    spec = JobSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert spec.template.secret_names() == ["hf-token", "wandb"]
    assert plain_secret_errors(spec) == []
    assert plain_secret_errors(spec.model_copy(update={"template": spec.template.model_copy(update={
        "env": {**spec.template.env, "SORT_KEY": "loss"}})}))[0]["field"] == "spec.template.env.SORT_KEY"
