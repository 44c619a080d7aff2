"""Composition root of the quota accountant: ``muster serve quota-accountant``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from services.quota_accountant.accountant import Accountant, AccountantSettings, Clock
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceRunner
from services.spec.cluster_file import load_cluster_file

SERVICE = "quota_accountant"


def build(
    options: ServeOptions, *, settings: AccountantSettings | None = None, clock: Clock | None = None
) -> tuple[ServiceRunner, Accountant]:
    """The runner and the accountant it runs (tests drive these directly)."""
    registry = CollectorRegistry()
    base = load_cluster_file(options.config_file) if options.config_file is not None else None
    accountant = Accountant(options.kafka, registry, settings=settings, base_config=base, clock=clock)
    runner = ServiceRunner(
        SERVICE, tasks=[accountant.run], registry=registry, http_host=options.http_host, http_port=options.http_port
    )
    return runner, accountant


async def serve(options: ServeOptions) -> None:
    """Run the quota accountant until SIGTERM / SIGINT."""
    runner, _ = build(options)
    await runner.run()
