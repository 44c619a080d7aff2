"""Bought nodes charged like usage: each node from the cloud's answer to its release, at the group's price, into the
window of the queue's burst budget; anonymous nodes (an autoscaler that labels none) by slot; facts delivered
again charge nothing twice; the state survives the table round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.config import BurstBudgetConfig, QueueConfig, QueueDefined
from schemas.decisions import NodeReleaseRequested, NodesRequested
from schemas.runs import NodesProvisioned, ProvisioningFailed
from services.quota_accountant.burst import BurstLedger
from services.quota_accountant.config_view import build_view
from services.quota_accountant.handlers import apply
from services.quota_accountant.ledger import Ledger
from services.quota_accountant.ledger_rows import TableMirror, ledger_of, rows_of
from services.quota_accountant.reports import burst_report
from services.quota_accountant.windows import window_start
from tests.quota_accountant.builders import T0, admitted, at, started, succeeded, wrap

T = T0.timestamp()  # 2026-11-10 12:00 UTC
PRICE = 3.0


def _requested(ledger: Ledger, request: str = "big-a0", queue: str = "team-a", nodes: int = 2,
               when: float = 0.0, price: float | None = PRICE) -> frozenset[str]:
    msg = NodesRequested(job_id=request.split("-a")[0], attempt=0, queue=queue, namespace="ns", cluster="cloud",
                         group="a100", request=request, nodes=nodes, gpus_per_node=8, gpu_type="a100",
                         ready_by=at(when + 360), gpu_hours=10.0, money=30.0, price_per_gpu_hour=price)
    return apply(ledger, wrap(msg, when), {}).burst


def _provisioned(ledger: Ledger, names: list[str], request: str = "big-a0", when: float = 360.0) -> frozenset[str]:
    msg = NodesProvisioned(job_id=request.split("-a")[0], attempt=0, cluster="cloud", observed_at=at(when),
                           request=request, group="a100", nodes=names)
    return apply(ledger, wrap(msg, when), {}).burst


def _released(ledger: Ledger, node: str, when: float, queue: str | None = "team-a") -> frozenset[str]:
    msg = NodeReleaseRequested(cluster="cloud", group="a100", node=node, queue=queue)
    return apply(ledger, wrap(msg, when), {}).burst


def test_each_node_is_charged_from_its_answer_to_its_release_at_the_groups_price() -> None:
    ledger = Ledger()
    assert _requested(ledger) == {"team-a"}
    assert ledger.burst.report("team-a", "month", T + 300).gpu_hours == 0  # nothing before the answer
    assert _provisioned(ledger, ["cloud-0", "cloud-1"]) == {"team-a"}
    running = ledger.burst.report("team-a", "month", T + 360 + 1800)
    assert running.nodes_held == 2
    assert running.gpu_hours == pytest.approx(2 * 8 * 0.5)  # held nodes count up to now
    assert running.money == pytest.approx(2 * 8 * 0.5 * PRICE)
    _released(ledger, "cloud-0", 360 + 3600)
    _released(ledger, "cloud-1", 360 + 7200)
    done = ledger.burst.report("team-a", "month", T + 100_000)
    assert done.nodes_held == 0
    assert done.gpu_hours == pytest.approx(8 * 1 + 8 * 2)
    assert done.money == pytest.approx((8 + 16) * PRICE)
    assert _released(ledger, "cloud-1", 360 + 7200) == frozenset()  # delivered again: charged once
    assert _released(ledger, "east-a100-0", 9000) == frozenset()  # a node that was not bought
    assert ledger.burst.report("team-a", "month", T + 100_000) == done


def test_nodes_the_autoscaler_did_not_name_are_charged_by_slot_and_released_by_queue() -> None:
    ledger = Ledger()
    _requested(ledger, nodes=3)
    _provisioned(ledger, [])
    assert ledger.burst.report("team-a", "month", T + 360).nodes_held == 3
    assert _released(ledger, "ip-10-0-0-7", 360 + 3600) == {"team-a"}
    assert _released(ledger, "ip-10-0-0-7", 360 + 3600) == frozenset()  # delivered again
    assert _released(ledger, "ip-10-0-0-8", 360 + 3600, queue="team-b") == frozenset()  # another queue's
    report = ledger.burst.report("team-a", "month", T + 360 + 3600)
    assert report.nodes_held == 2 and report.gpu_hours == pytest.approx(3 * 8)


def test_a_failed_request_charges_nothing_and_a_repeated_fact_changes_nothing() -> None:
    ledger = Ledger()
    _requested(ledger)
    failed = ProvisioningFailed(job_id="big", attempt=0, cluster="cloud", observed_at=at(400), request="big-a0",
                                reason="OutOfCapacity")
    apply(ledger, wrap(failed, 400), {})
    assert _provisioned(ledger, ["cloud-0"]) == frozenset()  # an answer after the failure is not charged
    assert _requested(ledger) == frozenset()  # the request delivered again is not opened anew
    assert ledger.burst.report("team-a", "month", T + 10_000).gpu_hours == 0


def test_spend_falls_into_the_window_it_accrued_in() -> None:
    ledger = Ledger()
    midnight = datetime(2026, 11, 11, tzinfo=UTC).timestamp() - T  # 12 h after T
    _requested(ledger, nodes=1, when=midnight - 7200)
    _provisioned(ledger, ["cloud-0"], when=midnight - 3600)  # an hour before midnight
    _released(ledger, "cloud-0", midnight + 2 * 3600)  # two hours after
    after = T + midnight + 3 * 3600
    assert ledger.burst.report("team-a", "day", after).gpu_hours == pytest.approx(2 * 8)
    assert ledger.burst.report("team-a", "day", after - 4 * 3600).gpu_hours == pytest.approx(8)
    assert ledger.burst.report("team-a", "month", after).gpu_hours == pytest.approx(3 * 8)
    day = ledger.burst.report("team-a", "day", after)
    assert (day.window_start, day.window_end) == (window_start("day", after), window_start("day", after) + 86400)


def test_a_bought_node_removed_without_release_stops_accruing_at_its_removal() -> None:
    burst = BurstLedger(horizon_s=86400.0)
    burst.requested("r", "team-a", "cloud", "a100", 8, PRICE, 1, T)
    burst.provisioned("r", ["cloud-0"], T + 100)
    assert burst.removed("cloud", "cloud-0", T + 100 + 3600) == {"team-a"}
    assert burst.report("team-a", "month", T + 50_000).gpu_hours == pytest.approx(8)
    assert burst.removed("cloud", "cloud-0", T + 100 + 7200) == set()


def test_the_price_of_an_older_producer_is_what_it_charged_per_gpu_hour() -> None:
    ledger = Ledger()
    _requested(ledger, nodes=1, price=None)  # 30 money for 10 GPU-hours
    _provisioned(ledger, ["cloud-0"])
    _released(ledger, "cloud-0", 360 + 3600)
    assert ledger.burst.report("team-a", "month", T + 5000).money == pytest.approx(8 * 3.0)


def test_the_burst_state_survives_the_tables_and_finished_requests_are_forgotten_after_the_horizon() -> None:
    ledger = Ledger(horizon_s=86400.0)
    mirror = TableMirror()
    changes = mirror.after_fact(ledger, [], [], [], _requested(ledger))
    assert {(c.table, c.key) for c in changes} == {("bought", "big-a0")}
    _provisioned(ledger, ["cloud-0", "cloud-1"])
    changes = mirror.after_fact(ledger, [], [], [], _released(ledger, "cloud-0", 4000))
    assert {(c.table, c.key) for c in changes} == {("bought", "big-a0"), ("burst", "team-a")}
    assert mirror.after_fact(ledger, [], [], [], _released(ledger, "cloud-0", 4000)) == []

    rebuilt = ledger_of(ledger.half_life_s, ledger.horizon_s, rows_of(ledger))
    for now in (T + 5000, T + 90_000):
        assert rebuilt.burst.report("team-a", "month", now) == ledger.burst.report("team-a", "month", now)
    assert rows_of(rebuilt) == rows_of(ledger) == mirror.rows

    _released(ledger, "cloud-1", 5000)
    ledger.prune(T + 5000 + 2 * 86400)
    assert not ledger.burst.requests  # finished, past the horizon
    pruned = mirror.after_prune(ledger)
    assert ("bought", "big-a0") in {(c.table, c.key) for c in pruned if c.row is None}
    kept = 8 * (4000 - 360 + 5000 - 360) / 3600  # the spend outlives the requests it came from
    assert ledger.burst.report("team-a", "month", T + 5000 + 2 * 86400).gpu_hours == pytest.approx(kept)


def test_the_report_names_the_window_of_the_queues_burst_budget() -> None:
    ledger = Ledger()
    _requested(ledger, nodes=1)
    _provisioned(ledger, ["cloud-0"])
    queue = QueueConfig(name="team-a", burst_budget=BurstBudgetConfig(gpu_hours=100, window="week"))
    view = build_view(None, [wrap(QueueDefined(item=queue), 0)])
    report = burst_report(ledger, view, "team-a", T + 360 + 3600)
    assert report.window == "week" and report.window_start.weekday() == 0
    assert report.gpu_hours == pytest.approx(8) and report.money == pytest.approx(24) and report.nodes_held == 1
    assert report.key() == "burst/team-a"
    assert burst_report(ledger, build_view(None, []), "team-a", T).window == "month"  # no budget configured


def test_an_attempt_on_bought_nodes_is_charged_to_neither_quota_nor_usage() -> None:
    ledger = Ledger()
    first = started("j-1", 1, when=5)  # a start may come before its admission
    apply(ledger, first, {})
    plain = admitted("j-1", 1)
    bought = wrap(plain.payload.model_copy(update={"bought": True}), 0)
    assert not apply(ledger, bought, {}).changed
    for fact in (started("j-1", 1, when=10), succeeded("j-1", 1, when=3610)):
        assert not apply(ledger, fact, {}).changed
    usage = ledger.queue_usage("team-a", T + 4000)
    assert (usage.allocated, usage.gpu_seconds, usage.accruing) == ({}, 0.0, 0)
    assert ledger.window_usage("team-a", "month", T + 4000)[1] == 0.0
    assert not apply(ledger, admitted("j-1", 1), {}).changed  # delivered again without the mark: still exempt
