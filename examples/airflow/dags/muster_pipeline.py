"""A nightly pipeline whose steps are Muster jobs: train -> evaluate -> publish.

Each step is queued by Muster (quotas, fair share, gang admission) and waited for in Airflow's triggerer, not in
a worker. The connection ``muster_default`` names the gateway and a token of team-a, for instance against
``muster up``::

    export AIRFLOW_CONN_MUSTER_DEFAULT='{"conn_type": "muster", "host": "http://127.0.0.1:8080",
                                         "password": "<team-a token from .muster/credentials.json>"}'
    airflow dags test muster_pipeline 2026-11-01

``train`` and ``evaluate`` are templated files (``jobs/``); ``publish`` is an inline spec. Run it with
``--conf '{"train_exit_code": 3}'`` to see a step fail with Muster's reason.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from muster.integrations.airflow.operator import MusterJobOperator

with DAG(
    dag_id="muster_pipeline",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    params={"queue": "team-a", "train_seconds": 3, "train_exit_code": 0},
    tags=["muster"],
) as dag:
    train = MusterJobOperator(task_id="train", spec="jobs/train.yaml")
    evaluate = MusterJobOperator(task_id="evaluate", spec="jobs/evaluate.yaml")
    publish = MusterJobOperator(
        task_id="publish",
        spec={
            "name": "nightly-publish",
            "queue": "{{ params.queue }}",
            "template": {
                "image": "registry.example/publish:1.4",
                "command": ["python", "publish.py", "--model-job", "{{ ti.xcom_pull('train', key='job_id') }}"],
                "resources": {"gpus": 1, "gpu_type": "a100", "cpu": "1", "memory": "2Gi"},
            },
            "annotations": {"kubesim.muster.dev/duration-seconds": "1"},
        },
    )
    train >> evaluate >> publish
