"""The quota accountant as a process of its own, with a frozen clock, for the kill/compare test:
``python -m tests.quota_accountant.accountant_process <bootstrap> <now (timestamp)>``."""

from __future__ import annotations

import asyncio
import logging
import sys

from services.quota_accountant.accountant import AccountantSettings
from services.quota_accountant.main import QuotaAccountantMain
from services.runtime.kafka import KafkaSettings
from services.runtime.options import ServeOptions


def main() -> None:
    bootstrap, now = sys.argv[1], float(sys.argv[2])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kafka = KafkaSettings(bootstrap=bootstrap, client_id="muster-quota-accountant-0", request_timeout_ms=15_000)
    options = ServeOptions(kafka=kafka, http_port=0)
    settings = AccountantSettings(publish_interval_s=3600)
    asyncio.run(QuotaAccountantMain(options, settings=settings, clock=lambda: now).run())


if __name__ == "__main__":
    main()
