"""One step submitted over Kafka instead of the gateway's API: the job is produced onto the tenant's intents
topic (``KafkaSubmitter``) and waited for through the gateway. The connection ``muster_kafka`` adds the tenant
and the Kafka settings to the gateway's URL and token::

    export AIRFLOW_CONN_MUSTER_KAFKA='{"conn_type": "muster", "host": "http://127.0.0.1:8000",
        "password": "<team-a token>", "extra": {"tenant": "team-a", "kafka": {"bootstrap": "127.0.0.1:9092"}}}'

On an authenticated cluster ``kafka`` holds the tenant principal's settings (``security_protocol``,
``sasl_mechanism``, ``sasl_username``, ``sasl_password``: ``.muster/kafka-clients/tenant-team-a.env`` without
the ``MUSTER_KAFKA_`` prefix, in lower case), and the job goes to ``muster.intents.team-a.v1``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from muster.integrations.airflow.operator import MusterJobOperator

with DAG(
    dag_id="muster_over_kafka",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    params={"queue": "team-a", "train_seconds": 3, "train_exit_code": 0},
    tags=["muster"],
) as dag:
    MusterJobOperator(task_id="train", spec="jobs/train.yaml", submit_via="kafka", muster_conn_id="muster_kafka")
