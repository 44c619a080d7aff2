"""Who may read a service's ``/metrics``: a deliberate setting, since the metrics name queues, tenants and
their GPU use.

``MUSTER_METRICS_EXPOSE``:

- ``localhost`` (the default): only clients on the same host (loopback peers) are answered; others get 403.
  ``muster up`` runs every service on 127.0.0.1, so its metrics stay readable there and nowhere else.
- ``public``: any client that reaches the port (a Prometheus in the cluster scraping pod IPs; the Kubernetes
  manifests under ``deploy/`` set this, next to an optional token).
- ``off``: ``/metrics`` answers 404.

``MUSTER_METRICS_TOKEN`` (or ``MUSTER_METRICS_TOKEN_FILE``, a file holding it): when set, ``/metrics`` also
requires ``Authorization: Bearer <token>`` (401 otherwise), in either mode. ``/healthz`` stays open.

Pure: the decision is a function of the peer address and the ``Authorization`` header.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

Expose = Literal["off", "localhost", "public"]
EXPOSE_VALUES: tuple[Expose, ...] = ("off", "localhost", "public")
DEFAULT_EXPOSE: Expose = "localhost"

EXPOSE_ENV = "MUSTER_METRICS_EXPOSE"
TOKEN_ENV = "MUSTER_METRICS_TOKEN"
TOKEN_FILE_ENV = "MUSTER_METRICS_TOKEN_FILE"


@dataclass(frozen=True)
class Verdict:
    """The answer to one request of ``/metrics``: ``status`` 200 serves the metrics; any other is a refusal
    with ``reason`` (and ``headers``, the bearer challenge of a 401)."""

    status: int
    reason: str = ""
    headers: Mapping[str, str] | None = None

    @property
    def allowed(self) -> bool:
        return self.status == 200


def is_loopback(peer: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and their IPv4-mapped forms; also for no address at all (a Unix socket)."""
    if peer is None or peer == "":
        return True
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


@dataclass(frozen=True)
class MetricsAccess:
    expose: Expose = DEFAULT_EXPOSE
    token: str | None = None

    def __post_init__(self) -> None:
        if self.expose not in EXPOSE_VALUES:
            raise ValueError(f"{EXPOSE_ENV}={self.expose!r}: expected one of {', '.join(EXPOSE_VALUES)}")
        if self.token is not None and not self.token.strip():
            raise ValueError(f"{TOKEN_ENV}: an empty token protects nothing; unset it instead")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MetricsAccess:
        """From ``MUSTER_METRICS_EXPOSE`` and ``MUSTER_METRICS_TOKEN`` / ``MUSTER_METRICS_TOKEN_FILE``.
        Raises ``ValueError`` on an unknown mode, an empty token or an unreadable token file."""
        env = os.environ if environ is None else environ
        expose = env.get(EXPOSE_ENV, "").strip().lower() or DEFAULT_EXPOSE
        token = env.get(TOKEN_ENV) or None
        token_file = env.get(TOKEN_FILE_ENV) or None
        if token is not None and token_file is not None:
            raise ValueError(f"set {TOKEN_ENV} or {TOKEN_FILE_ENV}, not both")
        if token_file is not None:
            try:
                token = Path(token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(f"{TOKEN_FILE_ENV}={token_file}: {exc.strerror or exc}") from None
        return cls(cast(Expose, expose), token)

    def check(self, peer: str | None, authorization: str | None) -> Verdict:
        """May the client at ``peer`` with this ``Authorization`` header read the metrics?"""
        if self.expose == "off":
            return Verdict(404, f"metrics are not served ({EXPOSE_ENV}=off)")
        if self.expose == "localhost" and not is_loopback(peer):
            return Verdict(403, f"metrics are served to clients on this host only ({EXPOSE_ENV}=localhost)")
        if self.token is not None:
            scheme, _, credentials = (authorization or "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(credentials.strip().encode(),
                                                                    self.token.encode()):
                return Verdict(401, "send Authorization: Bearer <the metrics token>",
                               {"WWW-Authenticate": 'Bearer realm="metrics"'})
        return Verdict(200)

    def describe(self) -> str:
        return f"{self.expose}{' with a bearer token' if self.token else ''}"
