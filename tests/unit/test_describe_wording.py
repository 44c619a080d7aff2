"""``muster describe`` reads as a person would write it: one pod, one GPU; a message said once; a job waiting
again after an attempt ended is shown as requeued; a place in the queue counted from 1, as Kubernetes Events
count it (the API's ``position`` counts the jobs ahead, from 0)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.api import Explanation, HistoryItem, JobView
from services.cli.render import change_line, counted, describe_text, place

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def _job(**fields: object) -> JobView:
    base: dict[str, object] = {"job_id": "j1", "tenant": "team-a", "queue": "team-a", "name": "train",
                               "state": "pending", "priority_class": "normal", "replicas": 1, "gpus": 1,
                               "submitted_at": NOW, "updated_at": NOW}
    return JobView(**{**base, **fields})  # type: ignore[arg-type]


def _explained(job: JobView, *, summary: str = "waiting", message: str = "",
               history: list[HistoryItem] | None = None) -> Explanation:
    return Explanation(job=job, summary=summary, reason="queue_quota_exhausted", message=message, position=0,
                       estimated_start=None, history=history or [])


def test_counts_are_singular_for_one_and_plural_otherwise() -> None:
    assert [counted(1, "pod"), counted(2, "pod"), counted(0, "GPU"), counted("0.5 shared", "GPU")] == [
        "1 pod", "2 pods", "0 GPUs", "0.5 shared GPUs"]
    assert "Size:           1 pod, 1 GPU\n" in describe_text(_explained(_job()), NOW)
    assert "Size:           4 pods, 8 GPUs\n" in describe_text(_explained(_job(replicas=4, gpus=8)), NOW)


def test_a_message_equal_to_the_summary_is_said_once() -> None:
    text = describe_text(_explained(_job(), summary="the queue's quota is used up", message="the queue's quota is "
                                    "used up"), NOW)
    assert text.count("the queue's quota is used up") == 1 and "Message:" not in text
    other = describe_text(_explained(_job(), summary="waiting", message="needs 8 GPUs of h100"), NOW)
    assert "Message:        needs 8 GPUs of h100" in other


def test_waiting_again_after_an_attempt_ended_reads_requeued() -> None:
    history = [HistoryItem(state="pending", reason="", message="", attempt=0, at=NOW - timedelta(minutes=9)),
               HistoryItem(state="running", reason="", message="", attempt=0, at=NOW - timedelta(minutes=8)),
               HistoryItem(state="preempting", reason="priority", message="", attempt=0,
                           at=NOW - timedelta(minutes=5)),
               HistoryItem(state="pending", reason="", message="", attempt=1, at=NOW - timedelta(minutes=4))]
    lines = describe_text(_explained(_job(attempt=1), history=history), NOW).splitlines()
    states = [line.split()[1] for line in lines[lines.index("History:") + 1:]]
    assert states == ["pending", "running", "preempting", "requeued"]


def test_a_place_in_the_queue_is_counted_from_one_in_every_text_a_person_reads() -> None:
    assert [place(0), place(4), place(None)] == ["1", "5", "-"]
    job = _job(position=0)
    assert "Position:       1 (1 = next)" in describe_text(_explained(job), NOW)
    assert " pending position 1" in change_line(job)
