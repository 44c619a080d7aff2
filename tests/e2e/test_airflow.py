"""The Airflow provider with real Apache Airflow (the ``muster[airflow]`` extra, in ``.venv-airflow``) against
the whole running system: the example DAG (train -> evaluate -> publish) run by ``airflow dags test``, a step
that fails with Muster's reason, a task run again that submits nothing new (or afresh after a failure), and the
trigger's wait picked up by a new process after the first was killed, as a triggerer's restart does.

``scripts/install`` makes the Airflow environment; without it these tests skip, except under CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from muster.client import AsyncClient, JobView, SubmitAccepted
from tests.e2e.builders import job_spec, member_token
from tests.e2e.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "examples" / "airflow" / "dags"
#: one Airflow command (interpreter start, DAG parse, the run itself) on a loaded two-core machine
COMMAND_TIMEOUT_S = 240.0
RUN_ID = re.compile(r"run_id=(manual__[^\s,)]+)")


def airflow_venv() -> Path:
    return Path(os.environ.get("MUSTER_AIRFLOW_VENV", ROOT / ".venv-airflow"))


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of an Airflow whose metadata database (SQLite) is migrated, once for the module."""
    venv = airflow_venv()
    if not (venv / "bin" / "airflow").exists():
        why = f"no Airflow at {venv}: `bash scripts/install` makes it (the muster[airflow] extra)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    home = tmp_path_factory.mktemp("airflow")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AIRFLOW", "MUSTER_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(DAGS), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    subprocess.run([str(venv / "bin" / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True,
                   timeout=COMMAND_TIMEOUT_S)
    yield env


def connected(env: dict[str, str], system: System, tenant: str = "team-a") -> dict[str, str]:
    """``env`` with the connection ``muster_default`` to the system's gateway, as a member of ``tenant``."""
    assert system.gateway_url is not None
    conn = {"conn_type": "muster", "host": system.gateway_url, "password": member_token(tenant)}
    return {**env, "AIRFLOW_CONN_MUSTER_DEFAULT": json.dumps(conn)}


async def airflow(env: dict[str, str], *args: str, status: int = 0) -> str:
    """Run ``airflow ARGS`` without blocking the system's event loop; its output (stdout and stderr), once it
    exited with ``status`` (1: a DAG run or task that failed)."""
    process = await asyncio.create_subprocess_exec(
        str(airflow_venv() / "bin" / "airflow"), *args, env=env, cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = out.decode(errors="replace")
    assert process.returncode == status, f"airflow {' '.join(args)} exited {process.returncode}:\n{text[-4000:]}"
    return text


def run_id_of(output: str) -> str:
    found = RUN_ID.search(output)
    assert found, f"no run id in the output:\n{output[-2000:]}"
    return found.group(1)


async def jobs_named(client: AsyncClient, *names: str) -> dict[str, list[JobView]]:
    """The tenant's jobs of each name, oldest first."""
    jobs = [job async for job in client.iter_jobs()]
    return {name: sorted((j for j in jobs if j.name == name), key=lambda j: j.submitted_at) for name in names}


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_a_dag_runs_its_steps_as_muster_jobs_and_a_task_run_again_submits_nothing(
        system: System, airflow_home: dict[str, str]) -> None:
    env = connected(airflow_home, system)
    output = await airflow(env, "dags", "test", "muster_pipeline", "2026-11-01")
    assert "[DAG TEST] running trigger in line" in output  # each step waited deferred, not in a worker
    assert "state=success" in output or "DagRunState.SUCCESS" in output, output[-3000:]
    assert system.gateway_url is not None
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        jobs = await jobs_named(client, "nightly-train", "nightly-evaluate", "nightly-publish")
        assert {name: [j.state for j in found] for name, found in jobs.items()} == {
            "nightly-train": ["succeeded"], "nightly-evaluate": ["succeeded"], "nightly-publish": ["succeeded"]}
        train = jobs["nightly-train"][0]
        assert (train.replicas, train.gpus) == (2, 8)  # the templated file, rendered with the DAG's params

        # the task run again in the same DAG run (cleared, or a worker lost): it finds its job, submits nothing
        again = await airflow(env, "tasks", "test", "muster_pipeline", "train", run_id_of(output))
        assert f"Muster job {train.job_id} was submitted by an earlier try of this task (succeeded)" in again
        assert "Submitted Muster job" not in again
        after = await jobs_named(client, "nightly-train")
        assert [j.job_id for j in after["nightly-train"]] == [train.job_id]


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_a_failed_job_fails_its_task_with_musters_reason_and_a_retry_runs_it_afresh(
        system: System, airflow_home: dict[str, str]) -> None:
    env = connected(airflow_home, system)
    output = await airflow(env, "dags", "test", "muster_pipeline", "2026-11-02", "--conf",
                           json.dumps({"train_exit_code": 3}), status=1)
    assert system.gateway_url is not None
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        jobs = await jobs_named(client, "nightly-train", "nightly-evaluate")
        [failed] = jobs["nightly-train"]
        assert failed.state == "failed" and jobs["nightly-evaluate"] == []  # the downstream steps never ran
        assert f"Muster job {failed.job_id} ended failed ({failed.reason}" in output, output[-3000:]
        assert "exit" in (failed.reason + failed.message).lower()

        # a retry of the failed task (cleared by hand, or Airflow's retries) runs the job again: a new job
        # (``tasks test`` exits 0 whatever the task did: its log says)
        again = await airflow(env, "tasks", "test", "muster_pipeline", "train", run_id_of(output))
        assert f"Muster job {failed.job_id} of an earlier try ended failed: submitting afresh" in again
        retried = (await jobs_named(client, "nightly-train"))["nightly-train"]
        assert len(retried) == 2 and retried[0].job_id == failed.job_id
        assert retried[1].state == "failed"  # the same spec (exit code 3) fails again, as it should
        assert f"Muster job {retried[1].job_id} ended failed (" in again and "Task failed with exception" in again


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_a_chain_queued_at_once_waits_in_muster_for_its_upstream_job(
        system: System, airflow_home: dict[str, str]) -> None:
    env = connected(airflow_home, system)
    # train runs long enough (20 s) that evaluate is surely queued while it runs, however loaded the machine
    output = await airflow(env, "dags", "test", "muster_chain", "2026-11-03", "--conf",
                           json.dumps({"train_seconds": 20}))
    assert system.gateway_url is not None
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        jobs = await jobs_named(client, "nightly-train", "nightly-evaluate")
        [train], [evaluate] = jobs["nightly-train"], jobs["nightly-evaluate"]
        assert (train.state, evaluate.state) == ("succeeded", "succeeded")
        # evaluate was queued while train still ran, and Muster held it until train had succeeded
        assert evaluate.submitted_at < train.updated_at
        history = (await client.describe(evaluate.job_id)).history
        assert "waiting_for_dependencies" in [item.reason for item in history], history
        assert evaluate.job_id in output  # the sensor waited on the job evaluate's task pushed


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_a_step_submitted_over_kafka_is_produced_once_and_waited_for(
        system: System, airflow_home: dict[str, str]) -> None:
    assert system.gateway_url is not None
    conn = {"conn_type": "muster", "host": system.gateway_url, "password": member_token("team-a"),
            "extra": {"tenant": "team-a", "kafka": {"bootstrap": system.settings.bootstrap}}}
    env = {**airflow_home, "AIRFLOW_CONN_MUSTER_KAFKA": json.dumps(conn)}
    output = await airflow(env, "dags", "test", "muster_over_kafka", "2026-11-04")
    assert "Produced Muster job" in output and "onto muster.intents.v1" in output, output[-3000:]
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        [train] = (await jobs_named(client, "nightly-train"))["nightly-train"]
        assert train.state == "succeeded"
        again = await airflow(env, "tasks", "test", "muster_over_kafka", "train", run_id_of(output))
        assert f"Muster job {train.job_id} was submitted by an earlier try of this task (succeeded)" in again
        assert "Produced Muster job" not in again
        assert [j.job_id for j in (await jobs_named(client, "nightly-train"))["nightly-train"]] == [train.job_id]


TRIGGER_SCRIPT = """
import asyncio, json, sys
from muster.integrations.airflow.trigger import MusterJobTrigger

async def main():
    classpath, kwargs = json.loads(sys.argv[1])
    assert classpath == "muster.integrations.airflow.trigger.MusterJobTrigger", classpath
    trigger = MusterJobTrigger(**kwargs)
    if sys.argv[2] == "kill":
        await trigger.on_kill()
        print("KILLED", flush=True)
        return
    print("WAITING", flush=True)
    async for event in trigger.run():
        print("EVENT " + json.dumps(event.payload), flush=True)

asyncio.run(main())
"""


async def trigger_process(env: dict[str, str], serialized: tuple[str, dict[str, object]],
                          mode: str = "run") -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(airflow_venv() / "bin" / "python"), "-c", TRIGGER_SCRIPT, json.dumps(serialized), mode, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def line_starting(process: asyncio.subprocess.Process, prefix: str) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(COMMAND_TIMEOUT_S):
        while line := (await process.stdout.readline()).decode():
            if line.startswith(prefix):
                return line[len(prefix):].strip()
    err = await process.stderr.read() if process.stderr else b""
    raise AssertionError(f"the trigger's process ended before {prefix!r}: {err.decode()[-3000:]}")


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_the_wait_survives_a_triggerer_restart_and_a_killed_task_cancels_its_job(
        system: System, airflow_home: dict[str, str]) -> None:
    env = connected(airflow_home, system)
    assert system.gateway_url is not None
    # the trigger as the operator defers with it, serialised as Airflow stores it for the triggerer
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        long = await client.submit(job_spec("long-step", gpus=8, duration_s=12.0))
        assert isinstance(long, SubmitAccepted)
        serialized = ("muster.integrations.airflow.trigger.MusterJobTrigger",
                      {"job_id": long.job_id, "muster_conn_id": "muster_default",
                       "states": ["cancelled", "failed", "rejected", "succeeded"], "cancel_on_kill": True,
                       "kill_reason": "the Airflow task was killed"})
        first = await trigger_process(env, serialized)
        await line_starting(first, "WAITING")
        await client.wait(long.job_id, "running", timeout=60)
        first.send_signal(signal.SIGKILL)  # the triggerer dies mid-wait; its trigger is handed to another
        await first.wait()
        second = await trigger_process(env, serialized)
        event = json.loads(await line_starting(second, "EVENT "))
        await second.wait()
        assert (event["job_id"], event["state"], event["error"]) == (long.job_id, "succeeded", "")
        assert (await client.get(long.job_id)).state == "succeeded"  # the restart did not cancel it

        # a user kills the deferred task (mark failed, clear): the trigger's on_kill cancels the job
        doomed = await client.submit(job_spec("doomed-step", gpus=8, duration_s=60.0))
        assert isinstance(doomed, SubmitAccepted)
        await client.wait(doomed.job_id, "running", timeout=60)
        killer = await trigger_process(env, (serialized[0], {**serialized[1], "job_id": doomed.job_id}), "kill")
        await line_starting(killer, "KILLED")
        await killer.wait()
        cancelled = await client.wait(doomed.job_id, "cancelled", timeout=60)
        assert cancelled.message == "the Airflow task was killed" or "killed" in cancelled.reason + cancelled.message
