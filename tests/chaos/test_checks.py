"""The chaos checks find what they look for, and only that."""

from __future__ import annotations

from schemas.config import MusterConfig
from services.chaos import checks
from services.chaos.cluster_checks import check_attempt_overlap, check_node_gpus
from services.chaos.ledger import Ledger
from services.chaos.plan import ChaosPlan, chaos_config
from tests.chaos.builders import Log, admitted, pod, status, stopped


def config() -> MusterConfig:
    return chaos_config(ChaosPlan(nominal=4, borrowing_limit=4))


def test_a_job_that_ended_once_passes_and_a_lost_or_open_one_does_not() -> None:
    log = Log().add(status("a", "pending")).add(status("a", "running")).add(status("a", "succeeded"))
    log.add(status("a", "succeeded")).add(status("b", "pending"))
    found = checks.check_terminal(["a", "b", "c"], checks.status_histories(log.events))
    assert [(v.check, v.job_id) for v in found] == [("terminal", "b"), ("lost", "c")]


def test_leaving_a_terminal_state_is_a_violation() -> None:
    log = Log().add(status("a", "cancelled")).add(status("a", "running")).add(status("a", "succeeded"))
    found = checks.check_terminal(["a"], checks.status_histories(log.events))
    assert sorted(v.detail for v in found) == [
        "left terminal state 'cancelled' for ['running', 'succeeded']",
        "more than one terminal state: ['cancelled', 'succeeded']",
    ]


def test_a_republished_decision_is_allowed_a_second_placement_is_not() -> None:
    log = Log().add(admitted("a")).add(admitted("a")).add(admitted("b")).add(admitted("b", node="n2"))
    assert [v.job_id for v in checks.check_admissions(log.events)] == ["b"]


def test_an_older_attempt_admitted_after_a_newer_one_is_a_violation() -> None:
    log = Log().add(admitted("a", 1)).add(admitted("a", 0))
    assert [v.check for v in checks.check_attempt_order(log.events)] == ["attempts"]


def test_ledger_releases_at_stop_and_finds_an_over_committed_node() -> None:
    nodes = {"n1": 8, "n2": 8}
    fine = Log().add(admitted("a", gpus=8)).add(stopped("a")).add(admitted("b", gpus=8))
    assert Ledger.of(config(), nodes).replay(fine.events) == []
    released_by_status = Log().add(admitted("a", gpus=8)).add(status("a", "pending", 1)).add(admitted("b", gpus=8))
    assert Ledger.of(config(), nodes).replay(released_by_status.events) == []
    over = Log().add(admitted("a", gpus=8)).add(status("a", "running")).add(admitted("b", gpus=4, queue="team-b"))
    [violation] = Ledger.of(config(), nodes).replay(over.events)
    assert violation.check == "capacity" and "n1: 12 GPUs" in violation.detail


def test_ledger_finds_a_queue_over_nominal_plus_borrowing() -> None:
    log = Log().add(admitted("a", gpus=6, node="n1")).add(admitted("b", gpus=4, node="n2"))
    [violation] = Ledger.of(config(), {"n1": 8, "n2": 8}).replay(log.events)
    assert violation.check == "quota" and "10 a100 GPUs" in violation.detail and "is 8" in violation.detail


def test_pods_over_a_node_and_overlapping_revisions_are_found() -> None:
    pods = [pod("a", "a-a0", start=0, end=5), pod("a", "a-a0-r1", start=4, end=9), pod("b", "b-a0", start=4.5, end=6),
            pod("c", "c-a0", node="n2", start=0, end=2), pod("c", "c-a1", attempt=1, node="n2", start=2, end=3)]
    [capacity] = check_node_gpus(pods, {"n1": 8, "n2": 8})
    assert "n1: pods held 12 GPUs" in capacity.detail and "for 0.500s" in capacity.detail
    [overlap] = check_attempt_overlap(pods)
    assert overlap.job_id == "a" and "for 1.000s" in overlap.detail
