"""Kafka client settings from the environment (``MUSTER_KAFKA_*``), passed through to aiokafka."""

from __future__ import annotations

from typing import Any, Literal

from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaSettings(BaseSettings):
    """Connection and identity of one Kafka client.

    Every field reads ``MUSTER_KAFKA_<FIELD>`` (e.g. ``MUSTER_KAFKA_BOOTSTRAP=broker:9092``).

    Security: ``security_protocol`` is ``PLAINTEXT`` by default. For TLS set ``SSL`` and, if the broker's
    certificate is not signed by a system CA, ``ssl_cafile``; for mutual TLS add ``ssl_certfile`` and
    ``ssl_keyfile`` (``ssl_key_password`` if the key is encrypted). For ``SASL_SSL`` with SCRAM set
    ``sasl_mechanism`` (``SCRAM-SHA-512`` by default), ``sasl_username`` and ``sasl_password``; the TLS
    fields above apply too. ``SASL_PLAINTEXT`` sends credentials unencrypted and is meant for tests only.
    """

    model_config = SettingsConfigDict(env_prefix="MUSTER_KAFKA_", extra="ignore", frozen=True)

    bootstrap: str = "127.0.0.1:9092"
    client_id: str = "muster"
    group_id: str | None = None
    request_timeout_ms: int = 30_000
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_check_hostname: bool = True

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments shared by aiokafka producers, consumers and admin clients."""
        return {
            "bootstrap_servers": self.bootstrap,
            "client_id": self.client_id,
            "request_timeout_ms": self.request_timeout_ms,
            **self.security_options(),
        }

    def security_options(self) -> dict[str, Any]:
        """The security part of ``client_options`` (protocol, TLS context, SASL mechanism and credentials)."""
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.security_protocol in ("SSL", "SASL_SSL"):
            context = create_ssl_context(
                cafile=self.ssl_cafile,
                certfile=self.ssl_certfile,
                keyfile=self.ssl_keyfile,
                password=self.ssl_key_password.get_secret_value() if self.ssl_key_password else None,
            )
            context.check_hostname = self.ssl_check_hostname
            options["ssl_context"] = context
        if self.security_protocol.startswith("SASL_"):
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"{self.security_protocol} needs sasl_username and sasl_password")
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return options

    def environment(self) -> dict[str, str]:
        """The ``MUSTER_KAFKA_*`` variables that give a child process these security settings and bootstrap
        (identity fields, client id and group, are the child's own)."""
        env = {"MUSTER_KAFKA_BOOTSTRAP": self.bootstrap, "MUSTER_KAFKA_SECURITY_PROTOCOL": self.security_protocol}
        if self.security_protocol.startswith("SASL_"):
            env["MUSTER_KAFKA_SASL_MECHANISM"] = self.sasl_mechanism
            env["MUSTER_KAFKA_SASL_USERNAME"] = self.sasl_username or ""
            env["MUSTER_KAFKA_SASL_PASSWORD"] = self.sasl_password.get_secret_value() if self.sasl_password else ""
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            value = getattr(self, name)
            if value:
                env[f"MUSTER_KAFKA_{name.upper()}"] = value
        return env

    def with_identity(self, *, client_id: str | None = None, group_id: str | None = None) -> KafkaSettings:
        """A copy with another client id and/or consumer group."""
        changes: dict[str, Any] = {}
        if client_id is not None:
            changes["client_id"] = client_id
        if group_id is not None:
            changes["group_id"] = group_id
        return self.model_copy(update=changes)
