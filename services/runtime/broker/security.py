"""Authentication and authorisation of an embedded Kafka node, as a production cluster runs them.

- Clients and the other brokers reach a node on its ``SASL_PLAINTEXT`` listener with SCRAM-SHA-512.
  SCRAM credentials live in the cluster metadata; the ones Muster needs (``acls.principals``) are
  written into it when the storage is formatted (``kafka-storage format --add-scram``), so the nodes
  can replicate to each other, and every client can log in, from the first start.
- The controller listener uses SASL/PLAIN with the broker's own user only: KRaft controllers cannot
  authenticate with SCRAM, whose credentials are themselves kept in the metadata the controllers serve.
- ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: nothing is allowed that an ACL
  (``acls.acl_table``) does not grant; the broker and the admin are super users.

Loopback only and without TLS: credentials cross the wire in SCRAM's challenge-response (the password
itself is never sent), the data in clear. A cluster across machines adds TLS (``SASL_SSL``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.runtime.kafka.acls import BROKER, SUPER_USERS
from services.runtime.kafka.principals import MECHANISM, KafkaCredentials

CLIENT_LISTENER = "SASL_PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class BrokerSecurity:
    """What a node needs to authenticate and authorise: every principal's credentials."""

    credentials: KafkaCredentials

    @property
    def broker_password(self) -> str:
        return self.credentials.password(BROKER)

    def listeners(self, host: str, port: int, controller_port: int) -> dict[str, str]:
        """The listener, SASL and authorizer entries of ``server.properties``."""
        password = self.broker_password
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="{BROKER}" password="{password}" user_{BROKER}="{password}";')
        scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                 f'username="{BROKER}" password="{password}";')
        client, controller = CLIENT_LISTENER.lower(), CONTROLLER_LISTENER.lower()
        return {
            "listeners": f"{CLIENT_LISTENER}://{host}:{port},{CONTROLLER_LISTENER}://{host}:{controller_port}",
            "advertised.listeners": f"{CLIENT_LISTENER}://{host}:{port}",
            "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:SASL_PLAINTEXT,{CLIENT_LISTENER}:SASL_PLAINTEXT",
            "inter.broker.listener.name": CLIENT_LISTENER,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.mechanism.controller.protocol": "PLAIN",
            f"listener.name.{controller}.sasl.enabled.mechanisms": "PLAIN",
            f"listener.name.{controller}.plain.sasl.jaas.config": plain,
            f"listener.name.{client}.sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.{client}.{MECHANISM.lower()}.sasl.jaas.config": scram,
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{name}" for name in SUPER_USERS),
        }

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that write every principal's SCRAM credentials."""
        arguments: list[str] = []
        for name, password in sorted(self.credentials.passwords.items()):
            arguments += ["--add-scram", f"{MECHANISM}=[name={name},password={password}]"]
        return arguments

    def probe_options(self) -> Mapping[str, Any]:
        """Client security options of the readiness probe (the admin's)."""
        return self.credentials.admin("unused").security_options()
