"""The Python client (``muster.client``) against the whole running system: a job submitted over HTTP and
waited for on the live stream, and a job produced straight onto ``muster.intents.v1`` by ``KafkaSubmitter``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest

from muster.client import (
    AsyncClient,
    Client,
    Conflict,
    Explanation,
    JobEnded,
    KafkaSubmitter,
    NotFound,
    SubmitAccepted,
)
from schemas.decisions import JobAdmitted
from tests.e2e.builders import ADMIN_TOKEN, job_spec, member_token
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


async def why_pending(client: AsyncClient, job_id: str) -> Explanation:
    """The job's explanation once it says why it waits, read again at each change the stream brings."""
    async with asyncio.timeout(30), contextlib.aclosing(client.watch(kinds=("job",), job_id=job_id)) as events:
        async for _ in events:
            explained = await client.describe(job_id)
            if explained.reason:
                return explained
    raise AssertionError(f"the stream ended before {job_id} said why it waits")


async def test_submit_describe_wait_and_refusals_over_http(system: System) -> None:
    assert system.gateway_url is not None
    url = system.gateway_url
    async with AsyncClient(url, member_token("team-b")) as bob, AsyncClient(url, member_token("team-a")) as alice:
        blocker = await bob.submit(job_spec("blocker", queue="team-b", gpus=8, replicas=2, duration_s=4.0))
        assert isinstance(blocker, SubmitAccepted)
        running = await bob.wait(blocker.job_id, "running", timeout=60)
        assert running.cluster == "east"

        with Client(url, member_token("team-a")) as sync_alice:
            gang = await asyncio.to_thread(sync_alice.submit, job_spec("gang", gpus=8, replicas=2),
                                           idempotency_key="pipeline-step-1")
            repeat = await asyncio.to_thread(sync_alice.submit, job_spec("gang", gpus=8, replicas=2),
                                             idempotency_key="pipeline-step-1")
            assert isinstance(gang, SubmitAccepted) and isinstance(repeat, SubmitAccepted)
            assert repeat.job_id == gang.job_id and repeat.duplicate

            # while the blocker holds every GPU, the gang waits, and says why
            explained = await why_pending(alice, gang.job_id)
            assert explained.job.state == "pending"
            assert explained.reason in {"insufficient_capacity", "waiting_for_reservation"}, explained
            assert explained.position is not None and explained.history

            done = await asyncio.to_thread(sync_alice.wait, gang.job_id, "succeeded", 90)
        assert (done.state, done.cluster, done.attempt) == ("succeeded", "east", 0)
        assert (await bob.get(blocker.job_id)).state == "succeeded"

        with pytest.raises(Conflict) as finished:
            await alice.cancel(gang.job_id)
        assert (finished.value.status, finished.value.error) == (409, "job_finished")
        with pytest.raises(NotFound):
            await alice.get(blocker.job_id)  # team-b's job is not revealed to team-a
        listed = await alice.list_jobs(active=False)
        assert [job.job_id for job in listed.items] == [gang.job_id]
        admitted = system.log.messages(JobAdmitted, job_id=gang.job_id)
        assert len(admitted) == 1 and admitted[0].replicas == 2

        failing = await alice.submit(job_spec("crash", gpus=1, exit_code=3, max_restarts=0))
        assert isinstance(failing, SubmitAccepted)
        with pytest.raises(JobEnded) as ended:
            await alice.wait(failing.job_id, "succeeded", timeout=60)
        assert ended.value.job.state == "failed"


async def test_kafka_submitter_jobs_run_and_are_checked_again(system: System) -> None:
    assert system.gateway_url is not None
    spec = job_spec("etl-step", gpus=2, duration_s=1.0)
    async with KafkaSubmitter(tenant="team-a", user="etl-pipeline", settings=system.settings) as pipeline:
        first = await pipeline.submit(spec, idempotency_key="2026-11-01", correlation_id="dag-run-1")
        again = await pipeline.submit(spec, idempotency_key="2026-11-01")
        # team-b's queue from team-a: the queue manager checks external producers again and rejects it
        foreign = await pipeline.submit(job_spec("sneaky", queue="team-b"))
    assert first.job_id == again.job_id

    async with AsyncClient(system.gateway_url, member_token("team-a")) as alice, \
            AsyncClient(system.gateway_url, ADMIN_TOKEN) as admin:
        done = await alice.wait(first.job_id, "succeeded", timeout=90, must_exist=False)
        rejected = await admin.wait(foreign.job_id, timeout=60, must_exist=False)
    assert (done.state, done.tenant, done.name) == ("succeeded", "team-a", "etl-step")
    assert (rejected.state, rejected.reason) == ("rejected", "forbidden_queue")
    assert len(system.log.messages(JobAdmitted, job_id=first.job_id)) == 1  # two records, one job
    assert not system.log.messages(JobAdmitted, job_id=foreign.job_id)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pipeline"


async def run_example(name: str, *args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / name), *args, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    async with asyncio.timeout(120):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_the_pipeline_examples_run(system: System, tmp_path: Path) -> None:
    """examples/pipeline: the Airflow-style step submits and waits (twice: the retry finds its job), and the
    Kafka producer's sweep runs, each trial once however often the sweep is produced."""
    assert system.gateway_url is not None
    env = {"MUSTER_URL": system.gateway_url, "MUSTER_TOKEN": member_token("team-a"), "MUSTER_CLI_CONFIG": "",
           "MUSTER_CONFIG": str(tmp_path / "none.yaml")}
    code, out = await run_example("submit_and_wait.py", "--run-id", "2026-11-01", "--timeout", "90", env=env)
    assert code == 0, out
    job_id = out.split()[1]
    assert f"{job_id} succeeded on cluster east" in out
    code, out = await run_example("submit_and_wait.py", "--run-id", "2026-11-01", env=env)
    assert code == 0 and "(submitted earlier by this run)" in out, out

    for _ in range(2):
        code, out = await run_example("kafka_producer.py", "--bootstrap", system.settings.bootstrap, "--sweep", "s7",
                                      "--wait", "--timeout", "90", env=env)
        assert code == 0, out
        assert "refused before sending: invalid job spec: spec.replicas" in out
        assert out.count(" succeeded on east") == 3
    jobs = [job for job in system.log.messages(JobAdmitted) if job.job_id.startswith("s7-")]
    assert len(jobs) == 3 and len(system.log.messages(JobAdmitted, job_id=job_id)) == 1
