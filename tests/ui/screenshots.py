"""Screenshots of every dashboard page for docs/ui.md, taken in Debian's headless Chromium from the whole
system (a private broker, kubesim, the five services) running a small workload. Rewrites docs/ui/*.png
and docs/ui.md::

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
    ("overview", "#/", "[data-testid=count-running]",
     "Overview: jobs by state, GPUs allocated and free per cluster and type, admissions per minute, the "
     "queues that wait longest."),
    ("jobs", "#/jobs?group=queue", "tr[data-job]",
     "Jobs, grouped by queue: saved views, filters (tenant, queue, state, priority, cluster, user, text), "
     "sortable columns, position and estimated start of pending jobs, paging."),
    ("job", None, "[data-testid=reason]",
     "One job: why it waits and when it should start, its history as a timeline, placement, chargeback, "
     "spec, and the actions the caller's role allows."),
    ("job-running", "RUNNING", ".attempt tr[data-pod]:not([data-pod=''])",
     "A running job: per attempt its cluster, namespace, Kubernetes Job and pods with their nodes, and the "
     "timeline of its events (Muster's states with their reasons, the dispatcher's and the node-state "
     "watcher's reports, failures with their classification)."),
    ("queues", "#/queues", "tr[data-queue]",
     "Queues and cohorts: the cohort tree; per queue nominal quota, in use, borrowed, lent, running and "
     "waiting jobs, fair share against actual share, GPU-hours used in the budget window."),
    ("cluster", "#/cluster", ".gpu.busy",
     "Cluster: every node's GPUs grouped by cluster, block and rack; hovering a GPU names its job."),
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
                running = await api.submit(job_spec("train-llm", gpus=8, replicas=2, duration_s=600))
                await api.submit(job_spec("eval-suite", queue="team-b", gpus=4, replicas=2, duration_s=600),
                                 tenant="team-b")
                for n in range(3):
                    await api.submit(job_spec(f"sweep-{n}", gpus=1, duration_s=1))
                waiter = await api.submit(job_spec("finetune-70b", gpus=8, replicas=3, duration_s=60,
                                                   priority_class="normal"))
                await api.wait_job(waiter, lambda j: j["state"] == "pending" and j["estimated_start"] is not None,
                                   within=60)
                await asyncio.sleep(3)  # the sweeps finish, usage is reported
                assert system.gateway_url is not None
                shots = []
                async with chromium(DESKTOP) as browser:
                    page = await browser.new_page()
                    await sign_in(page, system.gateway_url, ADMIN_TOKEN)
                    await save_view(page, system.gateway_url, "by queue", "#/jobs?group=queue")
                    for name, where, ready, caption in PAGES:
                        job = running if where == "RUNNING" else waiter
                        where = f"#/jobs/{job}" if where in (None, "RUNNING") else where
                        await page.goto(f"{system.gateway_url}/ui{where}")
                        await page.wait_for_selector(ready)
                        await asyncio.sleep(0.5)
                        await page.screenshot(path=str(out / f"{name}.png"), full_page=True)
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
