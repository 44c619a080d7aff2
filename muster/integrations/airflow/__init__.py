"""Apache Airflow's Muster provider (``pip install 'muster[airflow]'``, Airflow 3.1 or later).

- ``MusterJobOperator`` (``muster.integrations.airflow.operator``): submits a job once per task of a DAG run
  (a retried or cleared task finds its job again) and waits for it deferrably, so no worker slot is held while
  the job queues and runs; the task fails with Muster's reason, and cancels the job when it is killed.
- ``MusterJobSensor`` (``.sensor``): waits for an existing job.
- ``MusterJobTrigger`` (``.trigger``): the wait, in the triggerer, on the gateway's live stream.
- ``MusterHook`` (``.hook``): the ``muster`` connection type (the gateway's URL and a token).

Airflow finds the provider through the ``apache_airflow_provider`` entry point, which calls
``get_provider_info``. This module imports nothing of Airflow's, so the entry point is cheap to load.
See ``docs/integrations.md``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

PACKAGE = "muster"


def _version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "0+unknown"


def get_provider_info() -> dict[str, Any]:
    """What Airflow's ``ProvidersManager`` reads of this provider: its hooks, connection type and classes."""
    base = "muster.integrations.airflow"
    return {
        "package-name": PACKAGE,
        "name": "Muster",
        "description": "Queue the steps of a DAG as Muster jobs: quotas, fair share and gang admission on GPU "
                       "clusters, waited for deferrably.",
        "versions": [_version()],
        "integrations": [{"integration-name": "Muster", "tags": ["software"]}],
        "operators": [{"integration-name": "Muster", "python-modules": [f"{base}.operator"]}],
        "sensors": [{"integration-name": "Muster", "python-modules": [f"{base}.sensor"]}],
        "hooks": [{"integration-name": "Muster", "python-modules": [f"{base}.hook"]}],
        "triggers": [{"integration-name": "Muster", "python-modules": [f"{base}.trigger"]}],
        "connection-types": [{"hook-class-name": f"{base}.hook.MusterHook", "connection-type": "muster"}],
    }
