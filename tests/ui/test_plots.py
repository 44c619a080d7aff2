"""The dashboard's plots in a real browser (Debian's headless Chromium) against the gateway's app on in-memory
views (the same app and views the Kafka tables feed): with 50,000 jobs known, every plot draws on a canvas of
its own size with axes and a legend, the aggregates the page reads stay small, a member's plots show its
tenant's queues only, a job's timeline has a bar per state; with nothing known yet, each plot says so."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import uvicorn

from schemas.envelope import make_envelope
from schemas.status import JobStatusChanged
from services.gateway.dashboard_state import DashboardFeeds
from services.gateway.http import EmbeddedServer, bind, socket_url
from tests.gateway.builders import T0, TOKENS, Harness, harness
from tests.gateway.test_dashboard import node, send
from tests.ui.browser import PHONE, Console, chromium, sign_in

pytestmark = [pytest.mark.browser]
JOBS = 50_000
QUEUES = 40
NOW = T0 + timedelta(hours=2)
WAIT_MS = 30_000
#: the largest answer of a plot's read the page may get, whatever the number of jobs
MAX_PLOT_BYTES = 100_000


def status(i: int, state: str, second: int, *, attempt: int = 0, reason: str = "") -> JobStatusChanged:
    """Job ``i``: of team-a when even, of team-b when odd, in one of their 20 queues each; 1 to 12 GPUs."""
    tenant = "team-a" if i % 2 == 0 else "team-b"
    return JobStatusChanged(job_id=f"job-{i:06d}", tenant=tenant, queue=f"{tenant}-q{i % QUEUES:02d}",
                            name=f"train-{i % 97}", state=state, attempt=attempt, priority_class="normal", replicas=1,
                            gpus=1 + i % 12, reason=reason, submitted_at=T0 + timedelta(seconds=second - 30 - i % 600),
                            updated_at=T0 + timedelta(seconds=second))


def fold(feeds: DashboardFeeds, *messages: JobStatusChanged) -> None:
    for message in messages:
        feeds.status(message.job_id, make_envelope(message, "test"))


def fifty_thousand_jobs(feeds: DashboardFeeds) -> None:
    """Two hours of 50,000 jobs: each submitted and admitted, one in ten preempted and admitted again, the
    rest finished but for the last 2,000, which still run."""
    for i in range(JOBS):
        second = i * 7200 // JOBS
        fold(feeds, status(i, "pending", second), status(i, "admitted", second + 20 + i % 300))
        if i % 10 == 0:
            fold(feeds, status(i, "preempting", second + 400, reason=("priority", "quota_reclaim")[i % 20 // 10]),
                 status(i, "pending", second + 420, attempt=1), status(i, "running", second + 500, attempt=1))
        elif i < JOBS - 2000:
            fold(feeds, status(i, "succeeded", second + 600))
    for n in range(4):
        send(feeds.capacity, node(f"node-{n}"))


@contextlib.asynccontextmanager
async def serving(gw: Harness) -> AsyncIterator[str]:
    """The gateway's app on 127.0.0.1:<free port> in this event loop; its URL."""
    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn.Config(gw.app, lifespan="off", log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield socket_url(sock)
    finally:
        gw.ctx.dashboard.hub.close()
        server.should_exit = True
        await task
        sock.close()


@pytest.fixture
async def busy_gateway() -> AsyncIterator[str]:
    gw = harness(clock=lambda: NOW)
    fifty_thousand_jobs(gw.ctx.dashboard_feeds())
    async with serving(gw) as url:
        yield url


@pytest.fixture
async def idle_gateway() -> AsyncIterator[str]:
    gw = harness(clock=lambda: NOW)
    async with serving(gw) as url:
        yield url


async def chart(page: Any, name: str) -> dict[str, Any]:
    """The drawn chart ``name``: its canvas's size and its legend's labels."""
    selector = f".chart[data-plot={name}]"
    await page.wait_for_selector(f"{selector} canvas", timeout=WAIT_MS)
    drawn: dict[str, Any] = await page.eval_on_selector(selector, """box => ({
        width: box.querySelector('canvas').clientWidth, height: box.querySelector('canvas').clientHeight,
        labels: [...box.querySelectorAll('.u-legend .u-series th')].map(th => th.textContent.trim()),
        axes: [...box.querySelectorAll('.u-axis')].length,
    })""")
    return drawn


async def test_plots_of_fifty_thousand_jobs(busy_gateway: str) -> None:
    url = busy_gateway
    console = Console()
    reads: list[Any] = []
    async with chromium() as browser:
        page = await browser.new_page()
        console.watch(page)
        page.on("response", lambda r: reads.append(r) if "/v1/dashboard/plots/" in r.url else None)
        await sign_in(page, url, TOKENS["root"])

        # the overview: GPUs allocated per queue (the busiest eight, the other 32 summed, the clusters' GPUs)
        allocation = await chart(page, "allocation")
        assert allocation["width"] > 600 and allocation["height"] > 150 and allocation["axes"] >= 2
        assert allocation["labels"][0] == "time (UTC)" and allocation["labels"][-2:] == [
            "32 other queues", "GPUs in the clusters"]
        assert len(allocation["labels"]) == 1 + 8 + 2
        legend = await page.inner_text(".chart[data-plot=allocation] .u-legend")
        assert "GPUs" in legend  # at rest the legend reads the latest step, with its unit
        preemptions = await chart(page, "preemptions")
        assert preemptions["width"] > 600  # every tenth job is preempted: those of four of team-a's queues
        assert sorted(preemptions["labels"][1:]) == ["team-a-q00", "team-a-q10", "team-a-q20", "team-a-q30"]
        reasons = await page.inner_text("[data-testid=preemption-reasons]")
        assert "by reason: priority" in reasons and "quota_reclaim" in reasons
        await page.select_option("select[name=plot-window]", str(6 * 3600))
        await page.wait_for_function("""() => [...document.querySelectorAll(
            '.chart[data-plot=allocation] .u-legend th')].some(th => th.textContent.includes('other queues'))""",
                                     timeout=WAIT_MS)

        # the queues page: GPUs against shares, waits for first admission by size class
        await page.goto(f"{url}/ui#/queues")
        shares = await chart(page, "shares")
        assert shares["labels"] == ["queue", "GPUs in use", "fair share", "nominal quota"]
        waits = await chart(page, "waits")
        assert waits["labels"] == ["waited", "1 GPU or less", "2\u20134 GPUs", "5\u20138 GPUs", "more than 8 GPUs"]
        sizes = await page.eval_on_selector_all("[data-testid=wait-table] tr[data-size]",
                                                "rows => rows.map(r => [r.dataset.size, r.cells[1].textContent])")
        assert sum(int(n.replace(",", "")) for _, n in sizes) == JOBS  # every job's first admission, once
        options = await page.eval_on_selector_all("select[name=wait-queue] option", "os => os.map(o => o.value)")
        assert len(options) == 1 + QUEUES
        await page.select_option("select[name=wait-queue]", "team-b/team-b-q01")
        await page.wait_for_function("""() => {
            const cells = [...document.querySelectorAll('[data-testid=wait-table] tr[data-size] td:nth-child(2)')];
            return cells.reduce((n, c) => n + Number(c.textContent.replace(/,/g, '')), 0) === 1250; }""",
                                     timeout=WAIT_MS)

        # a job preempted once: two attempts, a bar per state
        await page.goto(f"{url}/ui#/jobs/job-000010")
        await page.wait_for_selector(".gantt rect.span", timeout=WAIT_MS)
        bars = await page.eval_on_selector_all(".gantt rect.span",
                                               "rs => rs.map(r => [r.dataset.attempt, r.dataset.state])")
        assert bars == [["0", "pending"], ["0", "admitted"], ["0", "preempting"], ["1", "pending"], ["1", "running"]]
        assert "time (UTC)" in await page.eval_on_selector(".gantt svg", "svg => svg.textContent")
        legend = await page.inner_text("[data-testid=timeline-legend]")
        assert all(state in legend for state in ("pending", "admitted", "running", "preempting"))

        # the browser got aggregates only: small answers, whatever the number of jobs
        sizes_read = [len(await r.body()) for r in reads]
        assert reads and max(sizes_read) < MAX_PLOT_BYTES, sizes_read

        # a member's plots: its tenant's queues only
        await page.click("text=Sign out")
        await sign_in(page, url, TOKENS["alice"])
        member = await chart(page, "allocation")
        queues = [label for label in member["labels"][1:] if label.startswith("team-")]
        assert queues and all(label.startswith("team-a-") for label in queues)
        assert "12 other queues" in member["labels"]  # team-a's 20 queues: eight shown, twelve summed
    assert console.problems == []


async def test_a_phone_shows_the_plots_within_its_width(busy_gateway: str) -> None:
    console = Console()
    async with chromium(PHONE) as browser:
        page = await browser.new_page()
        console.watch(page)
        await sign_in(page, busy_gateway, TOKENS["root"])
        for where, plots in (("#/", ("allocation", "preemptions")), ("#/queues", ("shares", "waits"))):
            await page.goto(f"{busy_gateway}/ui{where}")
            for name in plots:
                drawn = await chart(page, name)
                assert 0 < drawn["width"] <= PHONE["width"], (name, drawn)
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"] + 1, f"{where} overflows a phone's width: {width}px"
    assert console.problems == []


async def test_plots_without_data_say_so(idle_gateway: str) -> None:
    console = Console()
    async with chromium() as browser:
        page = await browser.new_page()
        console.watch(page)
        await sign_in(page, idle_gateway, TOKENS["root"])
        for name, text in (("allocation", "No data yet"), ("preemptions", "No preemptions"),
                           ("admissions", "No job admitted")):
            empty = page.locator(f"[data-plot-empty={name}]")
            await empty.wait_for(timeout=WAIT_MS)
            assert text in await empty.inner_text()
        assert await page.query_selector(".chart canvas") is None
        await page.goto(f"{idle_gateway}/ui#/queues")
        await page.locator("[data-plot-empty=waits]").wait_for(timeout=WAIT_MS)
        assert "No job was first admitted" in await page.inner_text("[data-plot-empty=waits]")
        shares = await chart(page, "shares")  # the configured queues' nominal quota and fair share, nothing in use
        assert shares["width"] > 0 and shares["labels"][1:] == ["GPUs in use", "fair share", "nominal quota"]
    assert console.problems == []
