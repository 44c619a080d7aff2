"""The dashboard's plots (/v1/dashboard/plots, the job page's spans, the queues' fair share in GPUs): the numbers
for a known set of status changes, tenant scoping, and bounded sizes however many jobs go by."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from schemas.envelope import make_envelope
from schemas.status import JobStatusChanged
from services.gateway.dashboard_plots import MAX_POINTS, MIN_POINTS, TOP_QUEUES, grid
from services.gateway.dashboard_series import (
    ALLOCATION_STEP_S,
    PREEMPTION_STEP_S,
    SERIES_WINDOW_S,
    WAIT_BOUNDS_S,
    WAIT_SLICE_S,
    WAIT_WINDOW_S,
    Buckets,
    PlotSeries,
    WaitStats,
)
from services.gateway.dashboard_state import DashboardFeeds
from tests.gateway.builders import T0, Harness, auth, status_changed
from tests.gateway.test_dashboard import busy, feeds, send  # noqa: F401  (fixtures)

NOW = T0 + timedelta(minutes=10)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def change(into: DashboardFeeds, job_id: str, state: str, second: float, **extra: Any) -> None:
    """``job_id`` is in ``state`` from ``second`` seconds after T0 (a team-a job of 8 GPUs unless told)."""
    send(into.status, status_changed(job_id, state=state, updated_at=at(second), **extra))


@pytest.fixture
def story(gw: Harness, feeds: DashboardFeeds) -> Harness:  # noqa: F811
    """Ten minutes of two tenants' jobs: admissions, a GPU-sharing job, a preemption and its repeat, a
    cancellation of a running job, a job that finishes, a second attempt admitted again."""
    gw.ctx.now = lambda: NOW
    change(feeds, "a-1", "pending", 0)
    change(feeds, "a-1", "admitted", 60)
    change(feeds, "a-1", "running", 75)
    change(feeds, "b-1", "admitted", 120, tenant="team-b", queue="team-b", gpus=4)
    change(feeds, "a-2", "admitted", 180, gpus=2)
    change(feeds, "a-3", "pending", 190, gpus=0, gpu_share=0.5, submitted_at=at(0))
    change(feeds, "a-3", "running", 200, gpus=0, gpu_share=0.5)
    change(feeds, "a-1", "preempting", 300, reason="quota_reclaim")
    change(feeds, "a-1", "preempting", 310, reason="quota_reclaim", message="grace period ends soon")
    change(feeds, "a-1", "pending", 330, attempt=1, reason="quota_reclaim")
    change(feeds, "b-1", "succeeded", 400, tenant="team-b", queue="team-b", gpus=4)
    change(feeds, "a-1", "admitted", 450, attempt=1)
    change(feeds, "a-1", "running", 460, attempt=1)
    change(feeds, "b-2", "running", 470, tenant="team-b", queue="team-b", gpus=1)
    change(feeds, "b-2", "preempting", 500, tenant="team-b", queue="team-b", gpus=1, reason="priority")
    change(feeds, "a-4", "running", 510, gpus=1)
    change(feeds, "a-4", "preempting", 520, gpus=1, reason="cancelled")  # cancelled while it ran
    return gw


async def get(client: httpx.AsyncClient, path: str, user: str, **params: Any) -> dict[str, Any]:
    response = await client.get(path, params=params, headers=auth(user))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# ---------------------------------------------------------------- GPUs allocated per queue


async def test_allocation_per_queue_at_the_end_of_every_step(client: httpx.AsyncClient, story: Harness) -> None:
    body = await get(client, "/v1/dashboard/plots/allocation", "root")
    assert (body["start"], body["step_s"], body["points"]) == ("2026-11-01T12:00:00Z", 15, 41)  # from the first change
    team_a, team_b = body["queues"]
    assert (team_a["queue"], team_a["tenant"], team_b["queue"]) == ("team-a", "team-a", "team-b")  # most first
    a = team_a["values"]
    assert a[3] == 0 and a[4] == 8  # a-1 admitted at 60 s: the step [60, 75)
    assert a[12] == 10  # a-2's 2 GPUs from 180 s
    assert a[13] == 10.5  # a-3 holds half a GPU from 200 s
    assert a[21] == 10.5 and a[22] == 2.5  # a-1 still holds while preempting, gives its 8 back at 330 s
    assert a[30] == 10.5 and a[34] == 11.5  # a-1 admitted again at 450 s; a-4 from 510 s
    assert a[-1] == 11.5  # a-4 holds its GPU while it is being stopped
    b = team_b["values"]
    assert b[7] == 0 and b[8] == 4 and b[25] == 4 and b[26] == 0  # b-1 from 120 s until it succeeded at 400 s
    assert b[31] == 1 and b[-1] == 1
    assert body["other"] is None and body["other_queues"] == 0
    assert body["capacity"] == 0  # no node reported


async def test_allocation_is_scoped_to_the_callers_tenant(client: httpx.AsyncClient, story: Harness) -> None:
    alice = await get(client, "/v1/dashboard/plots/allocation", "alice")
    assert [q["queue"] for q in alice["queues"]] == ["team-a"]
    bob = await get(client, "/v1/dashboard/plots/allocation", "bob")
    assert [q["queue"] for q in bob["queues"]] == ["team-b"]
    assert max(bob["queues"][0]["values"]) == 4


async def test_the_busiest_queues_are_shown_and_the_rest_summed(client: httpx.AsyncClient, gw: Harness,
                                                                feeds: DashboardFeeds) -> None:  # noqa: F811
    gw.ctx.now = lambda: NOW
    for n in range(TOP_QUEUES + 3):
        change(feeds, f"q{n}-job", "running", 30 + n, queue=f"q{n:02d}", gpus=n + 1)
    body = await get(client, "/v1/dashboard/plots/allocation", "alice")
    assert [q["queue"] for q in body["queues"]] == [f"q{n:02d}" for n in range(TOP_QUEUES + 2, 2, -1)]
    assert body["other_queues"] == 3 and body["other"][-1] == 1 + 2 + 3


# ---------------------------------------------------------------- preemptions


async def test_preemptions_per_step_once_each_and_not_cancellations(client: httpx.AsyncClient,
                                                                    story: Harness) -> None:
    root = await get(client, "/v1/dashboard/plots/preemptions", "root")
    assert (root["start"], root["step_s"], root["points"]) == ("2026-11-01T11:59:00Z", 60, 12)  # twelve at least
    assert root["total"] == 2 and root["reasons"] == {"priority": 1, "quota_reclaim": 1}
    by_queue = {q["queue"]: q["values"] for q in root["queues"]}
    assert by_queue["team-a"][6] == 1 and sum(by_queue["team-a"]) == 1  # at 300 s; its repeat at 310 s is not another
    assert by_queue["team-b"][9] == 1 and sum(by_queue["team-b"]) == 1
    alice = await get(client, "/v1/dashboard/plots/preemptions", "alice")
    assert [q["queue"] for q in alice["queues"]] == ["team-a"]
    assert alice["total"] == 1 and alice["reasons"] == {"quota_reclaim": 1}


# ---------------------------------------------------------------- waits for first admission


async def test_waits_per_queue_and_size_class(client: httpx.AsyncClient, story: Harness) -> None:
    alice = await get(client, "/v1/dashboard/plots/waits", "alice")
    assert alice["bounds_s"] == list(WAIT_BOUNDS_S) and alice["window_s"] == WAIT_WINDOW_S
    [team_a] = alice["queues"]
    sizes = {s["size"]: s for s in team_a["sizes"]}
    assert set(sizes) == {"1", "2-4", "5-8"}  # a-3 (half a GPU), a-2 (2 GPUs), a-1 (8 GPUs)
    big = sizes["5-8"]
    assert big["jobs"] == 1 and big["mean_s"] == 60 and big["max_s"] == 60  # a-1's first admission only
    assert big["counts"][WAIT_BOUNDS_S.index(60) + 1] == 1  # in the bin [60 s, 120 s)
    assert sizes["2-4"]["mean_s"] == 180
    assert (sizes["1"]["jobs"], sizes["1"]["mean_s"]) == (2, 355)  # a-3 waited 200 s, a-4 510 s
    assert [s["size"] for s in alice["all_queues"]] == ["1", "2-4", "5-8"]
    root = await get(client, "/v1/dashboard/plots/waits", "root")
    assert [q["queue"] for q in root["queues"]] == ["team-a", "team-b"]
    together = {s["size"]: s for s in root["all_queues"]}
    small = together["2-4"]  # a-2 waited 180 s, b-1 120 s
    assert (small["jobs"], small["mean_s"], small["max_s"]) == (2, 150, 180)
    assert small["counts"][4] == 2 and small["p50_s"] == 180 and small["p90_s"] == 180
    assert together["1"]["jobs"] == 3  # a-3, a-4 and b-2
    bob = await get(client, "/v1/dashboard/plots/waits", "bob")
    assert [q["queue"] for q in bob["queues"]] == ["team-b"]


def test_percentiles_are_upper_edges_of_their_bins() -> None:
    stats = WaitStats()
    for wait in (5, 5, 5, 20, 40, 90, 400, 9000, 9000, 50_000):
        stats.add(wait)
    assert stats.counts == [3, 1, 1, 1, 0, 1, 0, 0, 0, 2, 1]
    assert stats.at_most(0.5) == 60  # the fifth job waited 40 s: in [30 s, 60 s)
    assert stats.at_most(0.9) == 21600  # the ninth, 9,000 s: in [2 h, 6 h)
    assert stats.at_most(1.0) == 50_000  # the last bin is open: the longest wait


# ---------------------------------------------------------------- a job's timeline, the queues' shares


async def test_a_jobs_states_as_spans_per_attempt(client: httpx.AsyncClient, story: Harness) -> None:
    body = await get(client, "/v1/dashboard/jobs/a-1", "alice")
    spans = [(s["attempt"], s["state"], s["start"][11:19], s["end"][11:19], s["ongoing"]) for s in body["spans"]]
    assert spans == [
        (0, "pending", "12:00:00", "12:01:00", False),
        (0, "admitted", "12:01:00", "12:01:15", False),
        (0, "running", "12:01:15", "12:05:00", False),
        (0, "preempting", "12:05:00", "12:05:30", False),
        (1, "pending", "12:05:30", "12:07:30", False),
        (1, "admitted", "12:07:30", "12:07:40", False),
        (1, "running", "12:07:40", "12:10:00", True),  # until now
    ]
    assert body["spans"][3]["reason"] == "quota_reclaim"
    finished = await get(client, "/v1/dashboard/jobs/b-1", "bob")
    assert [(s["state"], s["end"][11:19], s["ongoing"]) for s in finished["spans"]] == [
        ("admitted", "12:06:40", False)]  # ends when it succeeded
    assert (await client.get("/v1/dashboard/jobs/a-1", headers=auth("bob"))).status_code == 404


async def test_queue_rows_carry_nominal_and_fair_share_in_gpus(client: httpx.AsyncClient,
                                                               busy: Harness) -> None:  # noqa: F811
    body = await get(client, "/v1/dashboard/queues", "alice")
    rows = {q["name"]: q for q in body["queues"]}
    # team-a and team-b (16 nominal each) are both busy in cohort research: half of 32 GPUs each
    assert (rows["team-a"]["nominal_gpus"], rows["team-a"]["fair_share_gpus"]) == (16, 16)
    assert (rows["team-a-ops"]["nominal_gpus"], rows["team-a-ops"]["fair_share_gpus"]) == (0, 0)


# ---------------------------------------------------------------- bounds


@pytest.mark.parametrize(("path", "window"), [("allocation", 299), ("allocation", SERIES_WINDOW_S + 1),
                                              ("preemptions", 0), ("waits", 899), ("waits", WAIT_WINDOW_S + 1)])
async def test_windows_out_of_range_are_refused(client: httpx.AsyncClient, path: str, window: int) -> None:
    response = await client.get(f"/v1/dashboard/plots/{path}", params={"window_s": window}, headers=auth("alice"))
    assert response.status_code == 422


def test_a_grid_never_exceeds_its_points() -> None:
    for window in (300, 3600, 4 * 3600, SERIES_WINDOW_S):
        for base in (ALLOCATION_STEP_S, PREEMPTION_STEP_S):
            steps = grid(T0, window, base, None)
            assert steps.points <= MAX_POINTS and steps.step_s % base == 0
            assert steps.start + steps.points * steps.step_s > T0.timestamp() >= steps.start + (steps.points - 1) \
                * steps.step_s
    since = int(T0.timestamp()) - 1000
    assert grid(T0, 3600, 15, since).points == 68  # from the first change seen
    assert grid(T0, 3600, 15, since + 900).points == MIN_POINTS  # but a few steps at least
    assert grid(T0, 300, 60, since + 900).points == 5  # and no more than the window


def test_buckets_keep_their_window_and_place_late_changes() -> None:
    gone: list[int] = []
    buckets: Buckets[list[int]] = Buckets(10, 100, list, lambda start, _: gone.append(start))
    for second in range(0, 300, 5):
        bucket = buckets.at(second)
        assert bucket is not None
        bucket.append(second)
    assert len(buckets) == 10 and [start for start, _ in buckets] == list(range(200, 300, 10))
    assert gone == list(range(0, 200, 10))
    late = buckets.at(255)  # after newer ones: into its own bucket
    assert late is not None and late[:2] == [250, 255]
    assert buckets.at(150) is None  # older than the window: dropped


def status(i: int, state: str, second: int, *, attempt: int = 0, reason: str = "") -> JobStatusChanged:
    tenant = "team-a" if i % 2 == 0 else "team-b"
    return JobStatusChanged(job_id=f"job-{i:06d}", tenant=tenant, queue=f"{tenant}-q{i % 40:02d}", name="train",
                            state=state, attempt=attempt, priority_class="normal", replicas=1, gpus=1 + i % 12,
                            reason=reason, submitted_at=at(second - 30 - i % 600), updated_at=at(second))


def test_memory_is_bounded_by_the_windows_not_the_jobs() -> None:
    series = PlotSeries()
    previous: JobStatusChanged | None = None
    for second in range(0, 12 * 3600, 5):  # twelve hours of a change every five seconds
        current = status(second, "running" if second % 10 else "preempting", second, reason="priority")
        series.observe(previous, current)
        previous = current
    assert len(series.allocation) <= SERIES_WINDOW_S // ALLOCATION_STEP_S
    assert len(series.preemptions) <= SERIES_WINDOW_S // PREEMPTION_STEP_S
    assert len(series.waits) <= WAIT_WINDOW_S // WAIT_SLICE_S


async def test_fifty_thousand_jobs_give_answers_of_bounded_size(client: httpx.AsyncClient, gw: Harness,
                                                                feeds: DashboardFeeds) -> None:  # noqa: F811
    """50,000 jobs over 40 queues of two tenants in two hours: submitted, admitted, one in ten preempted and
    admitted again, most finished. The answers stay small, and the GPUs shown equal those held."""
    jobs = 50_000
    gw.ctx.now = lambda: at(2 * 3600)  # the last jobs' changes are stamped up to a minute later: shown as now's
    started = time.perf_counter()
    for i in range(jobs):
        second = i * 7200 // jobs
        for message in (status(i, "pending", second), status(i, "admitted", second + 20)):
            feeds.status(message.job_id, make_envelope(message, "test"))
        if i % 10 == 0:
            for message in (status(i, "preempting", second + 40, reason="priority"),
                            status(i, "pending", second + 45, attempt=1), status(i, "running", second + 60, attempt=1)):
                feeds.status(message.job_id, make_envelope(message, "test"))
        elif i < jobs - 2000:
            message = status(i, "succeeded", second + 90)
            feeds.status(message.job_id, make_envelope(message, "test"))
    folded_s = time.perf_counter() - started
    holding = [s for s in gw.ctx.status.jobs() if s.state in ("admitted", "running")]
    sizes = {}
    for path in ("allocation", "preemptions", "waits"):
        window = WAIT_WINDOW_S if path == "waits" else SERIES_WINDOW_S
        response = await client.get(f"/v1/dashboard/plots/{path}", params={"window_s": window}, headers=auth("root"))
        assert response.status_code == 200
        sizes[path] = len(response.content)
        body = json.loads(response.content)
        if path == "allocation":
            assert len(body["queues"]) == TOP_QUEUES and body["other_queues"] == 40 - TOP_QUEUES
            shown = sum(q["values"][-1] for q in body["queues"]) + body["other"][-1]
            assert shown == sum(s.gpus for s in holding)
            assert body["points"] <= MAX_POINTS
        elif path == "preemptions":
            assert body["total"] == jobs // 10 and body["reasons"] == {"priority": jobs // 10}
        else:
            assert sum(s["jobs"] for s in body["all_queues"]) == jobs  # each job's first admission, once
            assert len(body["queues"]) == 40
    assert max(sizes.values()) < 100_000, sizes
    member = await client.get("/v1/dashboard/plots/allocation", headers=auth("alice"))
    assert {q["tenant"] for q in member.json()["queues"]} == {"team-a"}
    assert folded_s < 60, f"folding {jobs} jobs took {folded_s:.1f} s"
