"""The web dashboard's two figures, in Debian's headless Chromium against the gateway's app:

1. time to first render of the jobs page with ``--jobs`` (50,000) jobs known: from the navigation to the
   first row on screen, with the server's time for the page's read;
2. update latency: while ``--rate`` (500) status changes per second stream into the gateway's views,
   how long a status message of a job on the open page takes to show on it (a MutationObserver in the
   page stamps each change; browser and benchmark share the machine's clock).

The gateway runs in this process on in-memory views (the same app and views the Kafka tables feed;
the broker's hop is measured by ``muster bench throughput``). Usage::

    .venv/bin/python -m bench.ui [--jobs 50000] [--rate 500] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from datetime import timedelta
from typing import Any

import httpx
import uvicorn

from schemas.envelope import make_envelope
from schemas.status import JobStatusChanged
from services.gateway.dashboard_state import DashboardFeeds
from services.gateway.http import EmbeddedServer, bind, socket_url
from tests.gateway.builders import T0, TOKENS, harness
from tests.ui.browser import Console, chromium, chromium_missing, sign_in

STATES = ("pending", "running", "succeeded", "failed")


def status(i: int, *, state: str | None = None, reason: str = "", minutes: float = 0) -> JobStatusChanged:
    tenant = "team-a" if i % 2 == 0 else "team-b"
    return JobStatusChanged(
        job_id=f"job-{i:06d}", tenant=tenant, queue=tenant, name=f"train-{i % 97}", state=state or STATES[i % 4],
        attempt=0, priority_class="normal", replicas=1, gpus=1 + i % 8, position=i if (state or STATES[i % 4]) ==
        "pending" else None, reason=reason, submitted_at=T0 + timedelta(seconds=i),
        updated_at=T0 + timedelta(seconds=i, minutes=minutes))


def feed(feeds: DashboardFeeds, message: JobStatusChanged) -> None:
    feeds.status(message.key(), make_envelope(message, "bench"))


async def run(jobs: int, rate: int, seconds: float) -> None:
    gw = harness(clock=lambda: T0 + timedelta(days=1))
    feeds = gw.ctx.dashboard_feeds()
    started = time.perf_counter()
    for i in range(jobs):
        feed(feeds, status(i))
    print(f"{jobs:,} jobs folded into the views in {time.perf_counter() - started:.1f} s")
    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn.Config(gw.app, lifespan="off", log_config=None, access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    url = socket_url(sock)
    try:
        async with httpx.AsyncClient(base_url=url) as http:
            reads = []
            for _ in range(5):
                t = time.perf_counter()
                r = await http.get("/v1/dashboard/jobs", headers={"Authorization": f"Bearer {TOKENS['root']}"})
                reads.append(time.perf_counter() - t)
                assert r.json()["total"] == jobs
        print(f"GET /v1/dashboard/jobs (first page of {jobs:,}): median {statistics.median(reads) * 1000:.0f} ms")
        console = Console()
        async with chromium() as browser:
            page = await browser.new_page()
            console.watch(page)
            await sign_in(page, url, TOKENS["root"])
            renders = []
            for _ in range(3):
                await page.goto("about:blank")
                await page.goto(f"{url}/ui#/jobs")
                await page.wait_for_selector("tr[data-job]")
                renders.append(await page.evaluate("performance.now()") / 1000)
            print(f"jobs page, first render with {jobs:,} jobs: median {statistics.median(renders) * 1000:.0f} ms "
                  f"(runs: {', '.join(f'{r * 1000:.0f}' for r in renders)} ms)   goal <= 1000 ms")
            await measure_updates(page, feeds, jobs, rate, seconds)
        assert console.problems == [], console.problems
    finally:
        gw.ctx.dashboard.hub.close()
        server.should_exit = True
        await serving
        sock.close()


async def measure_updates(page: Any, feeds: DashboardFeeds, jobs: int, rate: int, seconds: float) -> None:
    """Probe jobs on the open page get a new reason every 200 ms while ``rate`` changes/s hit random jobs."""
    await page.evaluate("""() => {
        window.__seen = {};
        new MutationObserver(() => {
            for (const cell of document.querySelectorAll('tr[data-job] small')) {
                const m = /probe-(\\d+)/.exec(cell.textContent);
                if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = Date.now();
            }
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    on_page = [int(j.removeprefix("job-")) for j in
               await page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)")]
    probes = set(on_page)
    rng = random.Random(7)
    sent: dict[int, float] = {}
    tick = 0.05
    begin = time.perf_counter()
    end = begin + seconds
    probe = changes = 0
    next_probe = time.perf_counter()
    while time.perf_counter() < end:
        t = time.perf_counter()
        while changes < rate * (t - begin + tick):  # keep to the rate whatever the loop's overheads
            i = rng.randrange(jobs)
            if i in probes:
                continue  # a probe's change must not be overwritten before it shows
            feed(feeds, status(i, state=rng.choice(STATES), minutes=1 + changes))
            changes += 1
        if t >= next_probe:
            i = rng.choice(on_page)
            sent[probe] = time.time() * 1000
            feed(feeds, status(i, reason=f"probe-{probe}", minutes=100_000 + probe))
            probe += 1
            next_probe = t + 0.2
        await asyncio.sleep(max(0.0, tick - (time.perf_counter() - t)))
    await asyncio.sleep(1.5)
    seen: dict[str, float] = await page.evaluate("window.__seen")
    latencies = sorted(seen[str(p)] - at for p, at in sent.items() if str(p) in seen)
    missed = len(sent) - len(latencies)
    achieved = changes / seconds
    if not latencies:
        print("update latency: no probe reached the page")
        return
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    print(f"update latency at {achieved:.0f} status changes/s ({len(sent)} probes, {missed} not seen): "
          f"median {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms   "
          f"goal <= 1000 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rate", type=int, default=500, help="status changes per second during the update test")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    asyncio.run(run(args.jobs, args.rate, args.seconds))


if __name__ == "__main__":
    main()
