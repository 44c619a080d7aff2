"""Composition root of the quota accountant: ``muster serve quota-accountant``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from services.quota_accountant.accountant import Accountant, AccountantSettings, Clock
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceMain, ServiceRunner
from services.spec.cluster_file import load_cluster_file

SERVICE = "quota_accountant"


class QuotaAccountantMain(ServiceMain):
    """The quota accountant, served until SIGTERM or ``stop()``; ``accountant`` exists from construction."""

    def __init__(self, options: ServeOptions, *, settings: AccountantSettings | None = None,
                 clock: Clock | None = None) -> None:
        super().__init__()
        self.registry = CollectorRegistry()
        base = load_cluster_file(options.config_file) if options.config_file is not None else None
        self.accountant = Accountant(options.kafka, self.registry, settings=settings, base_config=base, clock=clock)
        self.options = options

    async def run(self, *, handle_signals: bool = True) -> None:
        runner = ServiceRunner(SERVICE, tasks=[self.accountant.run], registry=self.registry,
                               http_host=self.options.http_host, http_port=self.options.http_port)
        await self._serve(runner, handle_signals=handle_signals)


async def serve(options: ServeOptions) -> None:
    """``muster serve quota-accountant``."""
    await QuotaAccountantMain(options).run()
