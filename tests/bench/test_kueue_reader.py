"""The kueue benchmark's topic reader: where the waits of the workloads that preempted went."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.peers.kueue_kube import TopicReader
from schemas.codec import encode
from schemas.decisions import JobPreemptionRequested
from schemas.envelope import Message, make_envelope
from schemas.runs import JobStopped, RunSucceeded
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC
from services.runtime.kafka import KafkaSettings


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(1_000_000 + seconds, UTC)


def feed(reader: TopicReader, topic: str, message: Message, seconds: float, producer: str) -> None:
    reader._on(topic, encode(make_envelope(message, producer, occurred_at=at(seconds))))


def preempt(reader: TopicReader, victim: str, preemptor: str, seconds: float) -> None:
    feed(reader, DECISIONS_TOPIC, JobPreemptionRequested(job_id=victim, attempt=0, reason="higher_priority",
                                                         grace_period_s=0, preemptor=preemptor, cluster="c"),
         seconds, "queue-manager")


def test_a_preemptors_wait_is_split_at_its_first_stop_and_its_last_victims_end() -> None:
    reader = TopicReader(KafkaSettings())
    reader.timeline.submitted["big"] = 1_000_000.0
    preempt(reader, "v1", "big", 2.0)
    preempt(reader, "v2", "big", 2.5)
    feed(reader, DISPATCHES_TOPIC, JobStopped(job_id="v1", attempt=0, cluster="c", observed_at=at(3.0),
                                        reason="higher_priority", requeue=True), 3.0, "dispatcher")
    feed(reader, RUNS_TOPIC, RunSucceeded(job_id="v2", attempt=0, cluster="c", observed_at=at(2.8)), 2.8,
         "node-watcher")
    reader.timeline.decided["big"] = 1_000_003.5  # its JobAdmitted
    note = reader.preemptions({"big": "large", "v1": "small", "v2": "small"})
    assert "large (1, 2.0 victims each): submission -> first stop asked 2.00 s, -> last victim ended 1.00 s, " \
           "-> admitted 0.50 s" in note
    assert "1 of 2 victims finished before they were stopped" in note  # v2 ended on its own first


def test_no_preemptor_admitted_says_so() -> None:
    reader = TopicReader(KafkaSettings())
    reader.timeline.submitted["big"] = 1_000_000.0
    preempt(reader, "v1", "big", 2.0)  # its victim never ends, nor is it admitted
    assert reader.preemptions({"big": "large"}) == "no workload was admitted after preempting"
