"""How long the quota accountant takes to come back with N finished attempts behind it (a program, not a test).

Usage: python bench/accountant_recovery.py [--attempts 100000] [--before REV] [--code DIR]

For each code tree measured, on a fresh Apache Kafka broker of its own: N attempts of four queues and two
tenants are written to ``muster.decisions`` and ``muster.runs`` (admitted, started, succeeded: 3 records
each); an accountant folds them all (first run, timed), is stopped with SIGTERM's path (``stop()``), and a
new one is started and timed until it is ready (its ledger rebuilt, every report published). The ledger of
the restarted accountant is checked to hold every settled attempt.

``--before REV`` measures the code of git revision REV (exported with ``git archive`` into a temporary
directory) in the same run, before this tree; ``--code DIR`` measures the tree at DIR only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child_main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(args.code).resolve()))
    from services.runtime.broker import resolve_broker
    from services.runtime.kafka import KafkaSettings
    from services.runtime.kafka.topics import ensure_registry_topics

    with tempfile.TemporaryDirectory(prefix="muster-bench-kafka-") as log_dir:
        broker = resolve_broker(None, log_dir=Path(log_dir))
        try:
            settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="muster-quota-accountant-0")
            asyncio.run(ensure_registry_topics(settings))
            figures = asyncio.run(_measure(settings, args.attempts))
        finally:
            broker.close()
    import services.quota_accountant.accountant as accountant_module

    figures["code"] = str(Path(accountant_module.__file__).resolve().parents[2])
    print(json.dumps(figures), flush=True)
    return 0


async def _fill(settings: object, attempts: int) -> float:
    from datetime import UTC, datetime, timedelta

    from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
    from schemas.envelope import make_envelope
    from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest
    from schemas.runs import RunStarted, RunSucceeded
    from schemas.topics import DECISIONS_TOPIC, RUNS_TOPIC
    from services.runtime.kafka import EnvelopeProducer

    began = time.monotonic()
    base = datetime.now(UTC) - timedelta(days=3)
    async with EnvelopeProducer(settings) as producer:  # type: ignore[arg-type]
        futures = []
        for n in range(attempts):
            queue, tenant = f"queue-{n % 4}", f"tenant-{n % 2}"
            t0 = base + timedelta(seconds=n * 2.0)
            spec = JobSpec(name="train", queue=queue, replicas=2,
                           template=PodTemplate(image="registry.example/train:1",
                                                resources=ResourceRequest(gpus=8, gpu_type="a100")))
            admitted = JobAdmitted(job_id=f"job-{n}", attempt=1, tenant=tenant, queue=queue, namespace=tenant,
                                   priority=0, replicas=2, spec=spec,
                                   placement=PlacementPlan(cluster="east", nodes=[NodePods(node="n0", pods=2)]))
            futures.append(await producer.send(DECISIONS_TOPIC, make_envelope(admitted, "bench", occurred_at=t0)))
            start = RunStarted(job_id=f"job-{n}", attempt=1, cluster="east", observed_at=t0 + timedelta(seconds=5),
                               pods_running=2, pods_total=2)
            futures.append(await producer.send(RUNS_TOPIC, make_envelope(start, "bench")))
            end = RunSucceeded(job_id=f"job-{n}", attempt=1, cluster="east", observed_at=t0 + timedelta(seconds=600))
            futures.append(await producer.send(RUNS_TOPIC, make_envelope(end, "bench")))
            if len(futures) >= 30_000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    return time.monotonic() - began


async def _run_until(settings: object, attempts: int, *, restart: bool) -> tuple[float, float, int]:
    """Start an accountant; (seconds to ready, seconds until its ledger holds every settled attempt,
    settled attempts at ready); then stop it."""
    from services.quota_accountant.accountant import AccountantSettings
    from services.quota_accountant.main import QuotaAccountantMain
    from services.runtime.options import ServeOptions

    options = ServeOptions(kafka=settings, http_port=0)  # type: ignore[arg-type]
    main = QuotaAccountantMain(options, settings=AccountantSettings(publish_interval_s=3600,
                                                                    catch_up_timeout_s=3600))
    began = time.monotonic()
    task = asyncio.create_task(main.run(handle_signals=False))
    try:
        ready_wait = asyncio.ensure_future(main.accountant.ready.wait())
        done, _ = await asyncio.wait({ready_wait, task}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
            raise RuntimeError("the accountant ended before it was ready")
        ready = time.monotonic() - began
        at_ready = len(main.accountant.ledger.settled)
        while len(main.accountant.ledger.settled) < attempts:
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        complete = time.monotonic() - began
        if not restart:
            await asyncio.sleep(4.0)  # let the last offsets be committed before the stop
        return ready, complete, at_ready
    finally:
        main.stop()
        await task


async def _records(settings: object) -> dict[str, int]:
    """Records held per kind of topic: the inputs, the usage topic, the accountant's changelogs."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import TopicPartition

    options = settings.client_options()  # type: ignore[attr-defined]
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        topics = await admin.list_topics()
        kinds = {"inputs": [t for t in topics if t in ("muster.decisions.v1", "muster.runs.v1")],
                 "usage": [t for t in topics if t == "muster.usage.v1"],
                 "changelogs": [t for t in topics if t.endswith("-changelog")]}
        described = await admin.describe_topics([t for names in kinds.values() for t in names])
        partitions = {d["topic"]: [p["partition"] for p in d["partitions"]] for d in described}
    finally:
        await admin.close()
    reader = AIOKafkaConsumer(**options)
    await reader.start()
    try:
        counts: dict[str, int] = {}
        for kind, names in kinds.items():
            tps = [TopicPartition(t, p) for t in names for p in partitions.get(t, [])]
            if not tps:
                counts[kind] = 0
                continue
            ends = await reader.end_offsets(tps)
            starts = await reader.beginning_offsets(tps)
            counts[kind] = sum(ends[tp] - starts[tp] for tp in tps)
        return counts
    finally:
        await reader.stop()


async def _measure(settings: object, attempts: int) -> dict[str, object]:
    fill = await _fill(settings, attempts)
    _, first, _ = await _run_until(settings, attempts, restart=False)
    records = await _records(settings)
    ready, complete, at_ready = await _run_until(settings, attempts, restart=True)
    return {"attempts": attempts, "fill_s": round(fill, 1), "first_fold_s": round(first, 1),
            "restart_ready_s": round(ready, 2), "restart_complete_s": round(complete, 2),
            "settled_at_ready": at_ready, **{f"{k}_records": v for k, v in records.items()}}


def _measure_tree(code: Path, attempts: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", "--code", str(code), "--attempts", str(attempts)]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(code)}).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--before", help="git revision to measure first (the code before)")
    parser.add_argument("--code", default=str(ROOT), help="the code tree to measure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child_main(args)
    rows: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="muster-before-") as before_dir:
        if args.before:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before], check=True,
                                     stdout=subprocess.PIPE).stdout
            subprocess.run(["tar", "-x", "-C", before_dir], input=archive, check=True)
            rows.append((f"before ({args.before})", _measure_tree(Path(before_dir), args.attempts)))
        rows.append(("this tree", _measure_tree(Path(args.code), args.attempts)))
    print(f"{'code':<22} {'attempts':>9} {'fill s':>7} {'1st fold s':>10} {'restart: ready s':>17} "
          f"{'complete s':>10} {'settled at ready':>17} {'input recs':>10} {'usage recs':>10} {'changelog recs':>14}")
    for label, r in rows:
        print(f"{label:<22} {r['attempts']:>9} {r['fill_s']:>7} {r['first_fold_s']:>10} {r['restart_ready_s']:>17} "
              f"{r['restart_complete_s']:>10} {r['settled_at_ready']:>17} {r['inputs_records']:>10} "
              f"{r['usage_records']:>10} {r['changelogs_records']:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
