"""Screenshots of every dashboard page and plot for docs/ui.md, taken in Debian's headless Chromium from the
whole system (a private broker, kubesim, the five services) running a small workload: short sweeps, a large
training job, a job that borrows another tenant's idle quota until that tenant takes it back (a preemption),
and a job too large to start yet. Rewrites docs/ui/*.png and docs/ui.md::

    .venv/bin/python -m tests.ui.screenshots
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from schemas.config import ClusterConfig, NodeGroupConfig, TopologyConfig
from services.runtime.broker import resolve_broker
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.topics import ensure_registry_topics
from tests.e2e.builders import ADMIN_TOKEN, job_spec, muster_config
from tests.e2e.system import running_system
from tests.ui.browser import DESKTOP, PHONE, chromium, chromium_missing, sign_in

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [  # file, hash, what is waited for, caption
    ("overview", "#/", ".chart[data-plot=preemptions] canvas",
     "Overview: jobs by state, GPUs allocated and free per cluster and type, GPUs allocated per queue over "
     "time, preemptions, admissions per minute, the queues that wait longest."),
    ("jobs", "#/jobs?group=queue", "tr[data-job]",
     "Jobs, grouped by queue: saved views, filters (tenant, queue, state, priority, cluster, user, text), "
     "sortable columns, position and estimated start of pending jobs, paging."),
    ("job", None, ".gantt rect.span",
     "One job: why it waits and when it should start, its states as a timeline and as a history, placement, "
     "chargeback, spec, and the actions the caller's role allows."),
    ("job-running", "RUNNING", ".attempt tr[data-pod]:not([data-pod=''])",
     "A running job: per attempt its cluster, namespace, Kubernetes Job and pods with their nodes, and the "
     "timeline of its events (Muster's states with their reasons, the dispatcher's and the node-state "
     "watcher's reports, failures with their classification)."),
    ("queues", "#/queues", ".chart[data-plot=waits] canvas",
     "Queues and cohorts: the cohort tree; each queue's GPUs in use against its fair share and nominal quota; "
     "waits for first admission; per queue nominal quota, in use, borrowed, lent, running and waiting jobs, "
     "fair share against actual share, GPU-hours used in the budget window."),
    ("cluster", "#/cluster", ".gpu.busy",
     "Cluster: every node's GPUs grouped by cluster, block and rack; hovering a GPU names its job."),
]


PLOTS = [  # file, hash, the plot's section, what is waited for, caption
    ("plot-allocation", "#/", "section.plot:has(#allocated)", ".chart[data-plot=allocation] canvas",
     "GPUs allocated per queue over time (overview), stacked, each step's value the queue's GPUs at its end "
     "(15-second steps over the last 15 minutes or hour, 90-second ones over 6 hours): the eight queues holding "
     "the most and the rest summed, against the GPUs of the clusters (dashed). Here team-a borrows team-b's "
     "idle quota and gives it back when team-b reclaims it."),
    ("plot-preemptions", "#/", "section.plot:has(#preempted)", ".chart[data-plot=preemptions] canvas",
     "Preemptions per minute and queue in the same window (overview), with their reasons: here the one "
     "reclaim of team-b's quota."),
    ("plot-shares", "#/queues", "section.plot:has(#shares)", ".chart[data-plot=shares] canvas",
     "Per queue (the twenty using most), its GPUs in use, borrowed ones included, against its fair share of "
     "its cohort's GPUs and its nominal quota (queues page)."),
    ("plot-waits", "#/queues", "section.plot:has(#waits-plot)", ".chart[data-plot=waits] canvas",
     "How long the jobs first admitted in the last 24 hours waited from submission, as a histogram stacked by "
     "size class, with per class the mean, the median and 90th percentile (upper bounds: the edges of their "
     "bins) and the longest wait; one queue or all (queues page)."),
    ("job-timeline", "PREEMPTED", "section.plot:has(#timeline)", ".gantt rect.span[data-attempt='1']",
     "A job's timeline (job page): a row per attempt, a bar per state; this job ran on borrowed quota, was "
     "preempted when its owner took the quota back, and waits for its second attempt."),
]


def cluster() -> ClusterConfig:
    return ClusterConfig(name="east", node_groups=[NodeGroupConfig(
        name="a100", count=4, gpus_per_node=8, gpu_type="a100", cpu=64, memory_gb=512,
        topology=TopologyConfig(zone="east-z", block="b0", racks=2), taints=["nvidia.com/gpu"])])


async def take(out: Path) -> list[tuple[str, str]]:
    config = muster_config([cluster()], nominal=16)
    with tempfile.TemporaryDirectory() as tmp:
        broker = await asyncio.to_thread(resolve_broker, None, log_dir=Path(tmp) / "kafka")
        try:
            settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="muster-shots")
            await ensure_registry_topics(settings)
            async with running_system(settings, config, Path(tmp)) as system:
                api = system.api
                sweeps = [await api.submit(job_spec(f"sweep-{n}", gpus=1, duration_s=1)) for n in range(3)]
                for sweep in sweeps:
                    await api.wait_state(sweep, "succeeded")
                running = await api.submit(job_spec("train-llm", gpus=8, replicas=2, duration_s=600))
                await api.wait_state(running, "running")
                # team-a borrows team-b's idle quota, until team-b wants all of it: a preemption (quota_reclaim)
                borrower = await api.submit(job_spec("hp-search", gpus=8, duration_s=600))
                await api.wait_state(borrower, "running")
                await asyncio.sleep(16)  # a few steps of the allocation plot with the borrowed GPUs
                await api.submit(job_spec("eval-suite", queue="team-b", gpus=8, replicas=2, duration_s=600),
                                 tenant="team-b")
                await api.wait_job(borrower, lambda j: j["state"] == "pending" and j["attempt"] == 1, within=60)
                waiter = await api.submit(job_spec("finetune-70b", gpus=8, replicas=3, duration_s=60,
                                                   priority_class="normal"))
                await api.wait_job(waiter, lambda j: j["state"] == "pending" and j["estimated_start"] is not None,
                                   within=60)
                await asyncio.sleep(16)  # usage is reported; the plots have steps after the preemption
                assert system.gateway_url is not None
                shots = []
                async with chromium(DESKTOP) as browser:
                    page = await browser.new_page()
                    await sign_in(page, system.gateway_url, ADMIN_TOKEN)
                    await save_view(page, system.gateway_url, "by queue", "#/jobs?group=queue")
                    jobs = {None: waiter, "RUNNING": running, "PREEMPTED": borrower}
                    for name, where, ready, caption in PAGES:
                        where = f"#/jobs/{jobs[where]}" if where in jobs else where
                        await page.goto(f"{system.gateway_url}/ui{where}")
                        await page.wait_for_selector(ready)
                        await asyncio.sleep(0.5)
                        await page.screenshot(path=str(out / f"{name}.png"), full_page=True)
                        shots.append((name, caption))
                    for name, where, section, ready, caption in PLOTS:
                        where = f"#/jobs/{jobs[where]}" if where in jobs else where
                        await page.goto(f"{system.gateway_url}/ui{where}")
                        await page.wait_for_selector(ready)
                        await asyncio.sleep(0.5)
                        await page.locator(section).screenshot(path=str(out / f"{name}.png"))
                        shots.append((name, caption))
                async with chromium(PHONE) as phone:
                    page = await phone.new_page()
                    await sign_in(page, system.gateway_url, ADMIN_TOKEN)
                    await page.goto(f"{system.gateway_url}/ui#/jobs/{waiter}")
                    await page.wait_for_selector("[data-testid=reason]")
                    await asyncio.sleep(0.5)
                    await page.screenshot(path=str(out / "job-phone.png"))
                    shots.append(("job-phone", "The job page on a phone-sized screen (390x844)."))
                return shots
        finally:
            await asyncio.to_thread(broker.close)


async def save_view(page: Any, url: str, name: str, where: str) -> None:
    """Save the jobs table at ``where`` as the view ``name`` (kept in the browser)."""
    await page.goto(f"{url}/ui{where}")
    await page.wait_for_selector("tr[data-job]")
    await page.get_by_role("button", name="Save view…").click()
    await page.fill("input[name=view-name]", name)
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"select[name=view] option[value='{name}']", state="attached")


NOTES = [
    "## Saved views", "",
    "The jobs table's filters, sort and grouping live in the page's address (`#/jobs?state=pending&group=queue"
    "&sort=name...`), so any view can be shared as a link (\"Link to this view\"). \"Save view…\" keeps the "
    "current one under a name; the \"Saved view\" list picks it again and \"Delete view\" removes it. Saved "
    "views are kept in the browser's `localStorage` under `muster.views.v1:<tenant>/<user>` (the signed-in "
    "token's tenant and user), not on the gateway: they stay in that browser and survive reloads and sign-outs; "
    "another tenant or user signing in on the same browser gets a list of its own. They are not secret (anyone "
    "with the browser profile can read them) and do not follow a user to other browsers.", "",
    "## Kubernetes objects and events", "",
    "A job's page lists, per attempt, the cluster, namespace and `batch/v1` Job the dispatcher created "
    "(every Job of the attempt when a restart or rescale created another), its pods and the nodes they run "
    "on, and a timeline of the job's events: Muster's state changes with their reasons, the dispatcher's "
    "reports (Job created, dispatch failures, stops) and the node-state watcher's (started, all pods ready, "
    "succeeded, failures classified as the job's or the infrastructure's with the nodes blamed, evictions, "
    "deletions). The same is `GET /v1/jobs/{job_id}/events` in the API. The gateway reads it from "
    "`muster.dispatches` and `muster.runs`, not from the Kubernetes API, so a page view costs no cluster "
    "request; the reports last as long as those topics keep them (a week by default), and pods are named "
    "once the node-state watcher has seen the whole gang ready (until then the page shows the planned node "
    "of each pod; the watcher names an attempt's pods once, so after a restart of the gang in a new Job the "
    "page shows that Job's pods at their planned nodes).", "",
    "## Plots", "",
    "The overview plots GPUs allocated per queue over time (stacked), preemptions and admissions per minute; the "
    "queues page each queue's GPUs in use against its fair share and nominal quota, and the waits from submission "
    "to first admission per size class (1 GPU or a share of one, 2-4, 5-8, more than 8) as a histogram with "
    "percentiles; a job's page its states as a timeline, a row per attempt. Every plot has axes with units and a "
    "legend (at rest it reads the latest step, under the cursor the step pointed at), and says so when it has "
    "nothing to draw yet. They are drawn with [uPlot](https://github.com/leeoniya/uPlot) (vendored, "
    "`services/gateway/ui/vendor/`), the timeline as SVG.", "",
    "The gateway computes them, so the browser never reads per-job data for them, whatever the number of jobs: "
    "`GET /v1/dashboard/plots/allocation`, `/preemptions` (`window_s` up to 6 hours) and `/waits` (up to 24 "
    "hours), scoped like every dashboard read (a member sees its tenant's queues). It keeps them as it reads "
    "the status topic, in memory bounded by the windows and the number of queues: GPUs per queue in 15-second "
    "buckets and preemptions per queue and reason in 1-minute buckets over 6 hours, a wait-time histogram per "
    "queue and size class in 15-minute slices over 24 hours. A plot shows at most 240 steps and eight queues, "
    "the rest summed as one. A gateway that restarts rebuilds them from what the status topic still holds "
    "(after compaction, each job's latest state), so older steps may be missing until new changes come.", "",
]


def write_page(shots: list[tuple[str, str]]) -> str:
    lines = ["# The web dashboard", "",
             "Served by the gateway at `/ui` (`muster up` prints the URL). Sign in with a token of the gateway's "
             "tokens file; it is kept in the browser tab only. Pages update live from `GET /v1/stream`.", "",
             "These screenshots are produced by `.venv/bin/python -m tests.ui.screenshots` (headless Chromium, "
             "the whole system on kubesim, an administrator signed in); do not edit them by hand.", "", *NOTES]
    for name, caption in shots:
        lines += [f"## {name.replace('-', ' ').capitalize()}", "", caption, "", f"![{name}](ui/{name}.png)", ""]
    return "\n".join(lines)


def main() -> None:
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    out = DOCS / "ui"
    out.mkdir(parents=True, exist_ok=True)
    shots = asyncio.run(take(out))
    (DOCS / "ui.md").write_text(write_page(shots), encoding="utf-8")
    print(f"wrote {len(shots)} screenshots to {out} and {DOCS / 'ui.md'}")


if __name__ == "__main__":
    main()
