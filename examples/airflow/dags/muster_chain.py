"""The same pipeline queued in Muster as a whole: train and evaluate are submitted at once, evaluate waiting in
Muster for train to succeed (``after_tasks``), and a sensor waits for evaluate. Muster then sees the chain,
holds evaluate with ``waiting_for_dependencies`` and cancels it if train fails. See ``muster_pipeline.py`` for
the connection."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from muster.integrations.airflow.operator import MusterJobOperator
from muster.integrations.airflow.sensor import MusterJobSensor

with DAG(
    dag_id="muster_chain",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    params={"queue": "team-a", "train_seconds": 3, "train_exit_code": 0},
    tags=["muster"],
) as dag:
    train = MusterJobOperator(task_id="train", spec="jobs/train.yaml", wait_for_completion=False)
    evaluate = MusterJobOperator(task_id="evaluate", spec="jobs/evaluate.yaml", after_tasks=["train"],
                                 wait_for_completion=False)
    done = MusterJobSensor(task_id="done", job_id="{{ ti.xcom_pull(task_ids='evaluate', key='job_id') }}")
    train >> evaluate >> done
