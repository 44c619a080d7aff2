"""An Airflow-style pipeline step: submit a training job to Muster and block until it has finished.

Run it against `muster up` (it connects as the `muster` command does: MUSTER_URL and MUSTER_TOKEN, the
context named by MUSTER_CONTEXT, the project's .muster/cli.yaml, or the current context):

    python examples/pipeline/submit_and_wait.py --run-id 2026-11-01

In Airflow the step is one callable of a PythonOperator (or a @task); the run's logical date makes the
idempotency key, so a retried task instance finds the job it already submitted instead of queueing a
second one:

    @task(retries=3)
    def train(ds: str) -> str:
        return train_step(run_id=ds).job_id

The step fails (raises) when the job fails, is cancelled or rejected, or does not finish in time.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from muster.client import Client, JobEnded, JobView, MusterError, SubmitAccepted, WaitTimeout


def training_spec(run_id: str, *, gpus: int = 2, seconds: int = 5) -> dict[str, Any]:
    """The job of this step: one pod of ``gpus`` A100s in team-a's queue. On `muster up`'s simulated
    cluster the pod "runs" for ``seconds`` (the kubesim annotation); a real job would run its image."""
    return {
        "name": "nightly-train",
        "queue": "team-a",
        "priority_class": "normal",
        "replicas": 1,
        "template": {
            "image": "registry.example/train:1.4",
            "command": ["python", "train.py", "--date", run_id],
            "resources": {"gpus": gpus, "gpu_type": "a100", "cpu": "8", "memory": "64Gi"},
        },
        "runtime_estimate_s": seconds,
        "labels": {"pipeline": "nightly", "run": run_id},
        "annotations": {"kubesim.muster.dev/duration-seconds": str(seconds)},
    }


def train_step(run_id: str, *, timeout_s: float = 3600.0, client: Client | None = None) -> JobView:
    """Submit (idempotently, keyed by the run) and wait until the job succeeded; its final view."""
    owned = client is None
    muster = client or Client.from_env()
    try:
        accepted = muster.submit(training_spec(run_id), idempotency_key=f"nightly-train-{run_id}")
        if not isinstance(accepted, SubmitAccepted):
            raise TypeError("the spec has a schedule: it defined a recurring job")
        again = " (submitted earlier by this run)" if accepted.duplicate else ""
        print(f"submitted {accepted.job_id}{again}", flush=True)
        explained = muster.describe(accepted.job_id)
        print(f"  {explained.summary}", flush=True)
        job = muster.wait(accepted.job_id, "succeeded", timeout=timeout_s)
        print(f"{job.job_id} {job.state} on cluster {job.cluster} (attempt {job.attempt})", flush=True)
        return job
    finally:
        if owned:
            muster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--run-id", required=True, help="the pipeline run (e.g. the logical date)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the job")
    args = parser.parse_args()
    try:
        train_step(args.run_id, timeout_s=args.timeout)
    except JobEnded as exc:
        print(f"step failed: {exc}", file=sys.stderr)
        return 1
    except WaitTimeout as exc:
        print(f"step timed out: {exc}", file=sys.stderr)
        return 2
    except MusterError as exc:
        print(f"cannot run the step: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
