"""Mixed versions: the previous release's services beside this tree's, on one broker and one simulated
cluster, while jobs flow. Each service is upgraded one at a time (its old process stopped, the new one
started in its place), then rolled back one at a time; the chaos run's invariants hold throughout.

The previous release is the newest tag ``v<major>.<minor>.<patch>`` in HEAD's history (or
``MUSTER_PREVIOUS_RELEASE``), exported with ``git archive``; its services are ``muster serve`` processes of
the same virtualenv importing that tree (``tests/e2e/releases.py``), started as ``muster up`` starts
them. The order follows the rules of ``docs/architecture.md`` ("Changing a message"): an unknown field is
ignored on every internal topic, so any order would do there; on the intents topic it is refused, so the
queue manager (the intents' reader) is upgraded before the gateway (their writer) and rolled back after
it. Rolling back in the upgrade's order otherwise puts every other pair of services in both positions,
older writer and newer reader, newer writer and older reader.

In every configuration, a job submitted after the change must run before the next change; a tenant's
``SubmitJob`` with a misspelled field is written straight onto the intents topic, and must be
dead-lettered (``invalid_payload``) by whichever queue manager reads it: those are the only dead letters
allowed. At the end every submitted job has ended once, none was admitted twice or beyond a node's GPUs
or its queue's quota, none is left on the cluster, no service exited on its own, and no record of any
topic was dead-lettered but the typos.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from schemas.codec import encode
from schemas.envelope import make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec
from schemas.status import TERMINAL_STATES
from schemas.topics import INTENTS_TOPIC, TOPICS
from services.chaos import checks
from services.chaos.client import Gateway
from services.chaos.eventlog import read_log
from services.chaos.harness import Run, evaluate
from services.chaos.plan import CLUSTER, ChaosPlan, chaos_config
from services.chaos.pods import PodRecorder
from services.chaos.report import ChaosReport
from services.chaos.system import ChaosSystem, running_system
from services.chaos.workload import PlannedJob, plan_workload
from services.runtime.kafka import EnvelopeProducer
from services.runtime.kafka.headers import DLQ_DETAIL, DLQ_REASON, DLQ_TOPIC, header_value
from services.runtime.kafka.reader import read_to_end
from services.spec.ids import random_job_id
from tests.e2e.releases import REPO, NoRelease, export_tree, imported_from, previous_release, tree_environment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

#: jobs are drawn over this window, and submitted until the last service is rolled back (about half of it)
PLAN = ChaosPlan(seed=5, jobs=90, kills=0, broker_restarts=0, outages=0, watch_drops=0, duration_s=180.0,
                 drain_timeout_s=120.0, orphan_grace_s=15.0)
GATEWAY, QUEUE_MANAGER, ACCOUNTANT = "gateway", "queue-manager", "quota-accountant"
DISPATCHER, WATCHER = f"dispatcher/{CLUSTER}", f"node-watcher/{CLUSTER}"
#: the queue manager reads the intents the gateway writes: it goes first up, last down
UPGRADE = (ACCOUNTANT, WATCHER, DISPATCHER, QUEUE_MANAGER, GATEWAY)
ROLLBACK = (ACCOUNTANT, WATCHER, DISPATCHER, GATEWAY, QUEUE_MANAGER)
#: a job in one of these states was admitted, dispatched and seen running
RAN = frozenset({"running", "succeeded", "failed"})
FLOW_WITHIN_S = 90.0
#: the misspelled field of the tenant's intents (``gpu_type``)
TYPO = "gpu_tpye"


@dataclass(frozen=True)
class Tree:
    label: str
    path: Path


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    """The previous release's files, exported from git; skipped when the clone has no release to export."""
    try:
        name, commit = previous_release()
    except NoRelease as exc:
        pytest.skip(f"no previous release to run beside this tree: {exc}")
    path = export_tree(commit, tmp_path_factory.mktemp("previous-release") / "tree")
    try:
        yield Tree(f"{name} ({commit[:7]})", path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Rollout:
    """The services' versions as the roll goes, the configurations it passed through, and the typos sent."""

    system: ChaosSystem
    run: Run
    old: Tree
    new: Tree
    notify: Callable[[str], None]
    versions: dict[str, str] = field(default_factory=dict)
    configurations: list[str] = field(default_factory=list)
    typos: set[str] = field(default_factory=set)  # event ids
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def describe(self) -> str:
        return ", ".join(f"{name} {self.versions[name]}" for name in UPGRADE)

    async def switch(self, name: str, tree: Tree) -> None:
        """Stop the service's process and start it again from ``tree``, waiting until it is healthy."""
        child = self.system.children[name]
        self.system.restarting.add(name)  # not an exit of its own for keep_alive
        try:
            await child.stop()
            child.env.update(tree_environment(tree.path))
            with child.log_path.open("a", encoding="utf-8") as log:
                log.write(f"\n===== {name} from {tree.label} =====\n")
            await self.system.bring_up(name)
        finally:
            self.system.restarting.discard(name)
        self.versions[name] = tree.label

    async def flowing(self, since: set[str], what: str) -> None:
        """Wait until a job the gateway took after the jobs of ``since`` has run."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FLOW_WITHIN_S
        while True:
            for job in [j for j in self.run.job_ids.values() if j not in since]:
                if await self.run.gateway.state(job) in RAN:
                    return
            if loop.time() > deadline:
                others, _ = unexpected(await dead_letters(self.system), self.typos)
                raise AssertionError(f"no job submitted after {what} ran within {FLOW_WITHIN_S:g}s "
                                     f"({self.describe()}); dead letters other than the typos: {others[:5]}")
            await asyncio.sleep(0.5)

    async def send_typo(self, producer: EnvelopeProducer) -> None:
        """A tenant's own producer writes a submission whose spec misspells a field: refused by any version."""
        spec = JobSpec.model_validate({"name": "typo", "queue": "team-a", "template": {
            "image": "registry.example/typo:1", "resources": {"gpus": 1, "gpu_type": "a100"}}})
        job_id = random_job_id("typo", "team-a")
        envelope = make_envelope(SubmitJob(job_id=job_id, tenant="team-a", user="pipeline", spec=spec,
                                           submitted_at=datetime.now(UTC)), "team-a-pipeline")
        body = orjson.loads(encode(envelope))
        body["payload"]["spec"]["template"]["resources"][TYPO] = "a100"
        await (await producer.send_raw(INTENTS_TOPIC, orjson.dumps(body), key=job_id.encode()))
        self.typos.add(envelope.event_id)

    async def step(self, what: str, producer: EnvelopeProducer) -> None:
        """The configuration now running must serve work, and refuse a tenant's typo."""
        self.configurations.append(self.describe())
        self.notify(f"{what}: {self.describe()}")
        await self.send_typo(producer)

    async def roll(self, producer: EnvelopeProducer) -> None:
        try:
            await self.flowing(set(), "the start")
            await self.step("all on the previous release", producer)
            for direction, order, tree in (("upgraded", UPGRADE, self.new), ("rolled back", ROLLBACK, self.old)):
                for name in order:
                    before = set(self.run.job_ids.values())
                    await self.switch(name, tree)
                    await self.flowing(before, f"{name} was {direction}")
                    await self.step(f"{name} {direction}", producer)
        finally:
            self.done.set()


async def feed(run: Run, workload: list[PlannedJob], done: asyncio.Event) -> None:
    """Submit the planned jobs at their times until ``done``; wait for the submissions (and their cancels)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    submissions: list[asyncio.Task[None]] = []
    try:
        for job in workload:
            delay = started + job.at_s - loop.time()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), delay)
            if done.is_set():
                break
            submissions.append(asyncio.create_task(run.submit(job, started), name=f"submit {job.key}"))
        await asyncio.gather(*submissions)
    finally:
        for task in submissions:
            task.cancel()


@dataclass(frozen=True)
class Letter:
    source: str
    reason: str
    detail: str
    event_id: str | None


async def dead_letters(system: ChaosSystem) -> list[Letter]:
    """Every record of every dead-letter topic, with the event id of what it refused (when it was JSON)."""
    records = await read_to_end(system.settings, {spec.dlq: spec.partitions for spec in TOPICS.values()})
    letters = []
    for record in records:
        try:
            event_id = orjson.loads(record.value or b"null").get("event_id")
        except (orjson.JSONDecodeError, AttributeError):
            event_id = None
        letters.append(Letter(header_value(record.headers, DLQ_TOPIC) or record.topic,
                              header_value(record.headers, DLQ_REASON) or "?",
                              header_value(record.headers, DLQ_DETAIL) or "", event_id))
    return letters


def unexpected(letters: list[Letter], typos: set[str]) -> tuple[list[str], set[str]]:
    """Dead letters that are not a typo refused on the intents topic, and the typos that were dead-lettered."""
    found, refused = [], set()
    for letter in letters:
        if (letter.source == INTENTS_TOPIC and letter.event_id in typos and letter.reason == "invalid_payload"
                and TYPO in letter.detail):
            refused.add(letter.event_id)
            continue
        found.append(f"{letter.source}: {letter.reason}: {letter.detail[:300]}")
    return found, refused


async def test_services_upgraded_and_rolled_back_one_at_a_time_lose_nothing(
        previous_tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = Tree("this tree", REPO)
    assert imported_from(previous_tree.path) == previous_tree.path.resolve()
    assert imported_from(new.path) == new.path.resolve()
    loop = asyncio.get_running_loop()
    began = loop.time()

    def notify(message: str) -> None:
        print(f"[{loop.time() - began:6.1f}s] {message}", flush=True)

    config = chaos_config(PLAN)
    workload = plan_workload(PLAN, random.Random(PLAN.seed))
    report = ChaosReport(seed=PLAN.seed, jobs_planned=len(workload))
    recorder = PodRecorder()
    async with contextlib.AsyncExitStack() as stack:
        with monkeypatch.context() as starting:  # every service starts from the previous release
            for name, value in tree_environment(previous_tree.path).items():
                starting.setenv(name, value)
            system = await stack.enter_async_context(running_system(PLAN, config, tmp_path / "state", notify))
        for child in system.children.values():
            child.env.update(tree_environment(previous_tree.path))
        assert set(system.children) == set(UPGRADE)
        system.sim.store.add_listener(recorder)
        gateway = Gateway(system.gateway_url, system.admin_token)
        stack.push_async_callback(gateway.close)
        run = Run(PLAN, system, gateway, report, notify, planned=len(workload))
        rollout = Rollout(system, run, previous_tree, new, notify, dict.fromkeys(UPGRADE, previous_tree.label))
        stop = asyncio.Event()
        keeper = asyncio.create_task(system.keep_alive(stop, notify), name="mixed-versions keep-alive")
        stack.push_async_callback(lambda: keeper)
        stack.callback(stop.set)
        producer = await stack.enter_async_context(EnvelopeProducer(system.settings))
        async with asyncio.TaskGroup() as rolling:
            rolling.create_task(rollout.roll(producer), name="roll")
            rolling.create_task(feed(run, workload, rollout.done), name="feed")
        report.jobs_submitted = len(run.job_ids)
        notify(f"rolled through {len(rollout.configurations)} configurations; {report.jobs_submitted} jobs "
               "submitted; draining")
        log = await run.drain()
        ended = {job for job, state in checks.final_states(list(run.job_ids.values()),
                                                           checks.status_histories(log.events)).items()
                 if state in TERMINAL_STATES}
        left = await run.wait_orphans(ended)
        log = await read_log(system.settings)
        evaluate(run, log, recorder, left, [], workload)
        letters = await dead_letters(system)
    notify(f"done: final states {report.final_states}, {report.admissions} admissions, "
           f"{report.preemptions} preemptions, {len(letters)} dead letters")

    assert report.violations == [], json.dumps(report.as_json()["violations"], indent=1)
    others, refused = unexpected(letters, rollout.typos)
    assert others == [], f"dead-lettered while the versions were mixed: {others}"
    assert refused == rollout.typos, f"{len(rollout.typos - refused)} of {len(rollout.typos)} typos were not refused"
    assert system.unexpected_exits == {} and system.failed_starts == {}, (system.unexpected_exits,
                                                                          system.failed_starts)
    assert len(rollout.configurations) == 1 + len(UPGRADE) + len(ROLLBACK)
    assert sum(report.final_states.values()) == report.jobs_submitted
    assert set(report.final_states) <= TERMINAL_STATES, report.final_states
