"""Plain environment values that look like secrets, found before a spec leaves the submitter.

A job spec travels in clear text: on ``muster.intents.v1`` (which external producers write), in the
decisions and config topics, in the gateway's job view. A secret belongs in a Kubernetes Secret of the
job's namespace, which the spec names (``secret_ref``, ``env_from``) and only the pod reads. The gateway,
the Python client and the Kafka submitter refuse a plain value that looks like a secret, by its name
(``HF_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``...) or by its content (a URL with a password).
Names are a heuristic: an entry that is not a secret says so with ``not_secret: true``.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.jobspec import JobSpec, PodTemplate

#: the name ends in one of these (``PGPASSWORD``, ``HF_TOKEN``, ``CLIENT_SECRET``, ``OPENAI_APIKEY``)
_SECRET_SUFFIX = re.compile(r"(TOKEN|PASSWORD|PASSWD|PASSPHRASE|SECRET|SECRETS|CREDENTIAL|CREDENTIALS|APIKEY)$")
#: the name's last word is one of these (``WANDB_API_KEY``, ``SSH_PRIVATE_KEY``, ``MYSQL_PWD``)
_SECRET_WORD = re.compile(r"((^|[_.\-])(KEY|PAT)|[_.\-]PWD)$")  # not PWD itself: the working directory
#: a URL carrying a password (``postgres://user:pw@host/db``)
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:[^/\s@]+@")


@dataclass(frozen=True, slots=True)
class PlainSecret:
    """One environment entry that looks like a secret and carries a plain value."""

    name: str
    why: str  # "its name" or "its value"

    def message(self) -> str:
        return (f"{self.name} looks like a secret ({self.why}) but is a plain value, which Muster would carry in clear "
                f"text: put it in a Kubernetes Secret in the job's namespace and refer to it with "
                f"{{secret_ref: {{name: <secret>, key: <key>}}}} (or env_from); if it is not a secret, write it "
                f"{{value: ..., not_secret: true}}")


def secret_like_name(name: str) -> bool:
    """Whether an environment variable of this name usually holds a secret."""
    upper = name.upper()
    return bool(_SECRET_SUFFIX.search(upper) or _SECRET_WORD.search(upper))


def secret_like_value(value: str) -> bool:
    """Whether a value carries a credential whatever its name (a URL with a password)."""
    return bool(_URL_PASSWORD.search(value))


def plain_secrets(template: PodTemplate) -> list[PlainSecret]:
    """The template's plain entries that look like secrets and are not marked ``not_secret``, in spec order."""
    found: list[PlainSecret] = []
    for name, entry in template.env.items():
        if isinstance(entry, str):
            value = entry
        elif entry.value is None or entry.not_secret:
            continue
        else:
            value = entry.value
        if not value:
            continue  # an empty value holds nothing
        if secret_like_name(name):
            found.append(PlainSecret(name, "its name"))
        elif secret_like_value(value):
            found.append(PlainSecret(name, "its value holds a password in a URL"))
    return found


def spec_plain_secrets(spec: JobSpec) -> list[PlainSecret]:
    """The plain secret-looking entries of every role's template."""
    return [p for _, p in _located(spec, "")]


def _located(spec: JobSpec, prefix: str) -> list[tuple[str, PlainSecret]]:
    """(field path, entry) of each plain secret-looking entry: ``template.env.X``, or ``roles[i].template.env.X``."""
    if spec.roles:
        return [(f"{prefix}roles[{i}].template.env.{p.name}", p)
                for i, role in enumerate(spec.roles) for p in plain_secrets(role.template)]
    assert spec.template is not None
    return [(f"{prefix}template.env.{p.name}", p) for p in plain_secrets(spec.template)]


def plain_secret_errors(spec: JobSpec, prefix: str = "spec") -> list[dict[str, str]]:
    """``spec_plain_secrets`` in the shape of a 422's errors: ``{"field", "detail"}`` per entry."""
    return [{"field": field, "detail": p.message()} for field, p in _located(spec, f"{prefix}.")]
