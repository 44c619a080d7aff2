"""``MusterHook``: the ``muster`` connection type, and Muster's clients made from a connection.

A connection names the gateway and the token to call it with::

    AIRFLOW_CONN_MUSTER_DEFAULT='{"conn_type": "muster", "host": "https://muster.example:8443", "password": "<token>"}'

``host`` is the gateway's URL (or a host name, with ``port`` and ``schema`` the scheme, ``https`` by default);
``password`` is the token (a member's token of the tenant whose queues the DAG uses). ``extra`` may hold
``verify`` (false, or the path of a CA bundle) and ``timeout`` (seconds per request, 10 by default).

For pipelines that submit over Kafka (``MusterJobOperator(submit_via="kafka")``), ``extra`` also holds
``tenant``, ``kafka`` (``MUSTER_KAFKA_*`` settings without the prefix, lower case: ``bootstrap``,
``security_protocol``, ``sasl_mechanism``, ``sasl_username``, ``sasl_password``, ``ssl_cafile``...) and
optionally ``user`` (``airflow`` by default). The job is then produced onto the tenant's intents topic as
``KafkaSubmitter`` does, and waited for through the gateway.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from muster.client import AsyncClient, Client, KafkaSettings, KafkaSubmitter

DEFAULT_CONN_ID = "muster_default"


def gateway_url(host: str | None, port: int | None, schema: str | None) -> str:
    """The gateway's URL from a connection's fields."""
    if not host:
        raise ValueError("the Muster connection has no host: give the gateway's URL")
    if "://" in host:
        return host.rstrip("/")
    scheme = schema or "https"
    return f"{scheme}://{host}" + (f":{port}" if port else "")


class MusterHook(BaseHook):  # type: ignore[misc]  # Airflow is not typed for mypy here
    """Muster's clients for a ``muster`` connection: ``client()`` (blocking) and ``async_client()``."""

    conn_name_attr = "muster_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "muster"
    hook_name = "Muster"

    def __init__(self, muster_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.muster_conn_id = muster_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["login", "schema", "port"],
            "relabeling": {"host": "Gateway URL", "password": "Token"},
            "placeholders": {"host": "https://muster.example:8443", "extra": '{"verify": "/path/to/ca.pem"}'},
        }

    @staticmethod
    def _options(extra: dict[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if "verify" in extra:
            options["verify"] = extra["verify"]
        if "timeout" in extra:
            options["timeout"] = float(extra["timeout"])
        return options

    @classmethod
    def _settings(cls, conn: Any) -> tuple[str, str, dict[str, Any]]:
        if not conn.password:
            raise ValueError(f"the Muster connection {conn.conn_id!r} has no token (its password)")
        return gateway_url(conn.host, conn.port, conn.schema), conn.password, cls._options(conn.extra_dejson)

    def client(self) -> Client:
        """A blocking client of the connection's gateway (close it, or use ``with``)."""
        url, token, options = self.gateway()
        return Client(url, token, **options)

    def gateway(self) -> tuple[str, str, dict[str, Any]]:
        """The gateway's URL, the token and the client's options, read from the connection now."""
        return self._settings(self.get_connection(self.muster_conn_id))

    def kafka_submitter(self) -> KafkaSubmitter:
        """A ``KafkaSubmitter`` of the connection's tenant (``extra``: ``tenant``, ``kafka``, ``user``); start it
        in the event loop that uses it (``async with``)."""
        conn = self.get_connection(self.muster_conn_id)
        extra = conn.extra_dejson
        if not isinstance(extra.get("kafka"), dict) or not extra.get("tenant"):
            raise ValueError(f"the Muster connection {conn.conn_id!r} cannot submit over Kafka: its extra needs "
                             '"tenant" and "kafka" ({"bootstrap": ..., and the security settings})')
        settings = KafkaSettings(**extra["kafka"])
        return KafkaSubmitter(tenant=str(extra["tenant"]), user=str(extra.get("user", "airflow")),
                              settings=settings, producer="airflow")

    async def async_client(self) -> AsyncClient:
        """An asyncio client of the connection's gateway, for triggers (use ``async with``)."""
        url, token, options = self._settings(await self.aget_connection(self.muster_conn_id))
        return AsyncClient(url, token, **options)

    def test_connection(self) -> tuple[bool, str]:
        """The UI's "Test" button: the gateway answers with the queues the token may see."""
        try:
            with self.client() as client:
                queues = client.queues()
        except Exception as exc:
            return False, str(exc)
        return True, f"the gateway answered: {len(queues)} queue(s) visible"
