"""A pipeline that lives on Kafka: produce a small hyper-parameter sweep as `SubmitJob` intents straight onto
`muster.intents.v1`, then (with --wait) follow the jobs through the gateway until they finished.

Against `muster up` (its output names the Kafka bootstrap address):

    python examples/pipeline/kafka_producer.py --bootstrap 127.0.0.1:PORT --sweep sweep-42 --wait

Each intent is validated before it is sent (an invalid spec raises `InvalidSpec` and sends nothing) and
acknowledged by the broker (`acks=all`, idempotent producer) before the next. The idempotency key of each
trial makes a re-run of the same sweep queue nothing twice. The tenant and user are the producer's claim:
the intents topic trusts its producers, and the queue manager still refuses a queue of another tenant.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from muster.client import AsyncClient, InvalidSpec, JobEnded, KafkaSubmitter, MusterError, Produced

LEARNING_RATES = ("1e-4", "3e-4", "1e-3")


def trial_spec(sweep: str, learning_rate: str, *, seconds: int = 5) -> dict[str, Any]:
    """One trial: one pod of one A100 in team-a's queue (it runs ``seconds`` on `muster up`'s kubesim)."""
    return {
        "name": f"{sweep}-lr{learning_rate}".replace(".", "-").lower(),
        "queue": "team-a",
        "priority_class": "low",
        "replicas": 1,
        "template": {
            "image": "registry.example/sweep:3",
            "command": ["python", "trial.py", "--lr", learning_rate],
            "resources": {"gpus": 1, "gpu_type": "a100", "cpu": "4", "memory": "32Gi"},
        },
        "runtime_estimate_s": seconds,
        "labels": {"sweep": sweep},
        "annotations": {"kubesim.muster.dev/duration-seconds": str(seconds)},
    }


async def produce_sweep(bootstrap: str | None, sweep: str) -> list[Produced]:
    """Every trial of the sweep, produced and acknowledged; the refusal of an invalid spec shown first."""
    async with KafkaSubmitter(tenant="team-a", user="sweep-pipeline", bootstrap=bootstrap,
                              producer="sweep-pipeline") as pipeline:
        try:
            await pipeline.submit({**trial_spec(sweep, "0"), "replicas": 0})
        except InvalidSpec as exc:
            print(f"refused before sending: {exc}", flush=True)
        produced = []
        for rate in LEARNING_RATES:
            sent = await pipeline.submit(trial_spec(sweep, rate), idempotency_key=f"{sweep}/{rate}",
                                         correlation_id=sweep)
            print(f"produced {sent.job_id} -> {sent.topic}[{sent.partition}]@{sent.offset}", flush=True)
            produced.append(sent)
        return produced


async def follow(produced: list[Produced], timeout_s: float) -> int:
    """Wait for every trial through the gateway (connected as the `muster` command is); failures counted."""
    failed = 0
    async with AsyncClient.from_env() as client:
        waits = [client.wait(p.job_id, "succeeded", timeout=timeout_s, must_exist=False) for p in produced]
        for result in await asyncio.gather(*waits, return_exceptions=True):
            if isinstance(result, JobEnded):
                failed += 1
                print(f"{result.job.job_id} {result.job.state}: {result.job.message}", flush=True)
            elif isinstance(result, BaseException):
                raise result
            else:
                print(f"{result.job_id} {result.state} on {result.cluster}", flush=True)
    return failed


async def run(args: argparse.Namespace) -> int:
    produced = await produce_sweep(args.bootstrap, args.sweep)
    if not args.wait:
        return 0
    return 1 if await follow(produced, args.timeout) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", default=os.environ.get("MUSTER_KAFKA_BOOTSTRAP"),
                        help="Kafka bootstrap address (default: MUSTER_KAFKA_BOOTSTRAP; TLS and SASL settings "
                             "come from the other MUSTER_KAFKA_* variables)")
    parser.add_argument("--sweep", default="sweep-1", help="the sweep's name: its trials' keys derive from it")
    parser.add_argument("--wait", action="store_true", help="then follow the trials until they finished")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each trial")
    args = parser.parse_args()
    try:
        return asyncio.run(run(args))
    except MusterError as exc:
        print(f"sweep failed: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
