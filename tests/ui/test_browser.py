"""The web dashboard in a real browser (Debian's headless Chromium) against the whole running system:
sign in, see jobs appear and change state live, read why a job waits and when it should start, cancel
it from its page, read a running job's Kubernetes Job, pods, nodes and events, save, pick and delete a
view of the jobs table, tenant isolation, keyboard use and a phone-sized screen, the plots of a running
system; any console error fails."""

from __future__ import annotations

import time
from typing import Any

import pytest

from schemas.status import JobStatusChanged
from tests.e2e.builders import ADMIN_TOKEN, job_spec, member_token
from tests.e2e.system import System
from tests.ui.browser import PHONE, Console, chromium, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
#: a change to a job on an open page (its state) shows within a second of its status reaching the status
#: topic: the gateway folds it, the stream sends it after its 0.1 s batch window, the page patches the row
#: (measured over 8 runs on a shared 2-core machine: 0.05-0.15 s from the running status to the row showing it)
LIVE_S = 1.0
#: a job new to an open jobs table shows within 2 s of its submission: the queue manager takes it in and
#: publishes its status (0.02-0.04 s), the stream sends it, and the table reads itself again, at most once a
#: second (``throttleMs: 1000`` in ui/app.js), so a job coming just after another waits up to that second on
#: top of the live bound (measured over the same 8 runs: 0.10-0.26 s for the first job, 0.63-0.91 s for one
#: right after another)
NEW_JOB_S = LIVE_S + 1.0
WAIT_MS = 30_000  # only how long a wait may take before the test fails

#: installed in the page: ``window.__shown`` notes when (ms since the epoch, the clock the services' messages
#: carry) each row of the jobs table first showed, by job id, and each job first in each state, "<id>:<state>"
NOTE_ROWS = """() => {
  window.__shown = {};
  const note = () => {
    const now = performance.timeOrigin + performance.now();
    for (const row of document.querySelectorAll("tr[data-job]")) {
      for (const key of [row.dataset.job, row.dataset.job + ":" + row.dataset.state]) {
        if (!(key in window.__shown)) window.__shown[key] = now;
      }
    }
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ["data-job", "data-state"]});
  note();
}"""


async def shown_at(page: Any, key: str) -> float:
    """When the page first showed ``key`` (see ``NOTE_ROWS``), in seconds since the epoch."""
    shown: dict[str, float] = await page.evaluate("window.__shown")
    assert key in shown, f"{key} never shown: {sorted(shown)}"
    return shown[key] / 1000


async def on_topic_at(system: System, job_id: str, state: str) -> float:
    """When the queue manager put the job's first status in ``state`` on the status topic (the envelope's
    time, seconds since the epoch)."""
    await system.log.wait_for(JobStatusChanged, job_id=job_id, state=state, within=30)
    return next(e.occurred_at.timestamp() for e in system.log.envelopes
                if isinstance(e.payload, JobStatusChanged) and (e.payload.job_id, e.payload.state) == (job_id, state))


async def test_member_follows_jobs_live_reads_why_pending_and_cancels(system: System) -> None:
    assert system.gateway_url is not None
    url = system.gateway_url
    console = Console()
    async with chromium() as browser:
        page = await browser.new_page()
        console.watch(page)
        await sign_in(page, url, member_token("team-a"))
        assert "team-a" in await page.inner_text("[data-testid=who]")
        await page.click("text=Jobs")
        await page.wait_for_selector("table.jobs")
        await page.evaluate("window.__notReloaded = true")
        await page.evaluate(NOTE_ROWS)

        # a job submitted elsewhere appears, then goes pending -> running, with no reload: live
        submitted = time.time()
        blocker = await system.api.submit(job_spec("blocker", gpus=8, replicas=2, duration_s=120.0))
        row = f"tr[data-job='{blocker}']"
        await page.wait_for_selector(row, timeout=WAIT_MS)
        await page.wait_for_selector(f"{row}[data-state=running]", timeout=WAIT_MS)
        appeared = await shown_at(page, blocker) - submitted
        assert appeared <= NEW_JOB_S, f"the blocker showed {appeared:.2f}s after its submission"
        changed = await shown_at(page, f"{blocker}:running") - await on_topic_at(system, blocker, "running")
        assert changed <= LIVE_S, f"the blocker showed running {changed:.2f}s after its status on the topic"
        # another tenant's job never shows
        other = await system.api.submit(job_spec("theirs", queue="team-b", gpus=1, duration_s=60.0), tenant="team-b")
        submitted = time.time()
        waiter = await system.api.submit(job_spec("waiter", gpus=8, duration_s=5.0))
        await page.wait_for_selector(f"tr[data-job='{waiter}']", timeout=WAIT_MS)
        appeared = await shown_at(page, waiter) - submitted
        assert appeared <= NEW_JOB_S, f"the waiter showed {appeared:.2f}s after its submission"
        await system.api.wait_state(other, "pending", "running", within=30)
        assert await page.query_selector(f"tr[data-job='{other}']") is None
        assert await page.evaluate("window.__notReloaded") is True

        # its page says why it waits and when it should start
        await page.click(f"tr[data-job='{waiter}'] a")
        await page.wait_for_selector("[data-testid=reason]")
        await system.api.wait_job(waiter, lambda j: j["state"] == "pending" and j["estimated_start"] is not None,
                                  within=30, what="pending with an estimated start")
        await page.locator("[data-testid=eta]", has_not_text="unknown").wait_for(timeout=WAIT_MS)
        job = await system.api.job(waiter)
        assert await page.inner_text("[data-testid=reason]") == job["reason"] != ""
        eta = await page.inner_text("[data-testid=eta]")
        assert eta.startswith(("in ", "now")), eta
        assert "pending" in await page.inner_text("[data-testid=summary]")

        # cancelled from the page: the page shows it
        await page.click("text=Cancel job")
        await page.click("text=Yes, cancel")
        await page.wait_for_selector("h1 .badge.state-cancelled", timeout=WAIT_MS)
        assert (await system.api.job(waiter))["state"] == "cancelled"

        # another tenant's job page is not found
        await page.goto(f"{url}/ui#/jobs/{other}")
        await page.wait_for_selector("[role=alert]")
        assert "404" in await page.inner_text("[role=alert]")
        console.problems = [p for p in console.problems if "404" not in p]  # the refused read, as expected

        # the blocker runs: its page names its Kubernetes Job, its pods and their nodes, and its events
        await page.goto(f"{url}/ui#/jobs/{blocker}")
        await page.wait_for_selector(".attempt[data-attempt='0'] tr[data-pod]:not([data-pod=''])", timeout=WAIT_MS)
        cluster = system.first_cluster()
        [kube_job] = await cluster.jobs(blocker)
        assert await page.inner_text("[data-testid=kube-job]") == kube_job["metadata"]["name"]
        assert await page.inner_text("[data-testid=kube-namespace]") == kube_job["metadata"]["namespace"]
        assert await page.inner_text("[data-testid=kube-cluster]") == cluster.name
        shown = await page.eval_on_selector_all(
            ".attempt[data-attempt='0'] tr[data-pod]", "rows => rows.map(r => [r.dataset.pod, r.dataset.node])")
        kube_pods = await cluster.pods(blocker)
        assert sorted(map(tuple, shown)) == sorted((p["metadata"]["name"], p["spec"]["nodeName"]) for p in kube_pods)
        await page.wait_for_selector("[data-testid=events] li[data-kind=pods_ready]", timeout=WAIT_MS)
        kinds = await page.eval_on_selector_all("[data-testid=events] li", "items => items.map(i => i.dataset.kind)")
        assert {"state", "dispatched", "started", "pods_ready"} <= set(kinds), kinds
        assert "running" in await page.inner_text("[data-testid=events]")
        api_events = (await system.api.http.get(f"/v1/jobs/{blocker}/events",
                                                headers={"Authorization": f"Bearer {member_token('team-a')}"})).json()
        assert api_events["attempts"][0]["job_name"] == kube_job["metadata"]["name"]

        # saved views: the table's filters, sort and grouping under a name, kept across a reload, picked, deleted
        await page.goto(f"{url}/ui#/jobs?state=running&sort=name&descending=false&group=queue")
        await page.wait_for_selector(f"tr[data-job='{blocker}']", timeout=WAIT_MS)
        await page.get_by_role("button", name="Save view…").click()
        await page.fill("input[name=view-name]", "running by name")
        await page.keyboard.press("Enter")
        await page.wait_for_selector("select[name=view] option[value='running by name']", state="attached")
        await page.goto(f"{url}/ui#/jobs")
        before = len(console.problems)
        await page.reload()
        await page.wait_for_selector(f"tr[data-job='{waiter}']", timeout=WAIT_MS)  # every job, the cancelled one too
        # a read of the table still on its way when the page reloaded was aborted by the reload, as expected
        console.problems[before:] = [p for p in console.problems[before:] if not p.endswith("net::ERR_ABORTED")]
        await page.select_option("select[name=view]", "running by name")
        await page.wait_for_function("location.hash.includes('state=running')")
        await page.wait_for_selector(f"tr[data-job='{waiter}']", state="detached", timeout=WAIT_MS)
        view = await page.evaluate("new URLSearchParams(location.hash.split('?')[1]).toString()")
        assert view == "descending=false&group=queue&sort=name&state=running"  # the address carries the view
        assert await page.eval_on_selector("select[name=group]", "s => s.value") == "queue"
        states = await page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.state)")
        assert states and set(states) == {"running"}
        share = await page.get_attribute("a.share", "href")
        assert share == f"#/jobs?{view}"
        await page.get_by_role("button", name="Delete view").click()
        await page.wait_for_selector("select[name=view] option[value='running by name']", state="detached")
        stored = await page.evaluate("Object.entries(localStorage).filter(([k]) => k.startsWith('muster.views'))")
        assert stored == [["muster.views.v1:team-a/" + (await page.inner_text("[data-testid=who]")).split(" · ")[0],
                           "[]"]]
    assert console.problems == []


async def test_admin_tours_every_page_by_keyboard_on_a_phone(system: System) -> None:
    assert system.gateway_url is not None
    url = system.gateway_url
    console = Console()
    job_id = await system.api.submit(job_spec("tour", gpus=4, replicas=2, duration_s=120.0))
    await system.api.wait_state(job_id, "running", within=30)
    async with chromium(viewport=PHONE) as browser:
        page = await browser.new_page()
        console.watch(page)
        await sign_in(page, url, ADMIN_TOKEN)
        await page.wait_for_selector("[data-testid=count-running]")
        assert await page.inner_text("[data-testid=count-running]") == "1"
        # the running job's GPUs in the allocation plot, drawn within a phone's width, its queue in the legend
        await page.locator(".chart[data-plot=allocation] .u-legend th", has_text="team-a").wait_for(timeout=WAIT_MS)
        size = await page.eval_on_selector(".chart[data-plot=allocation] canvas",
                                           "c => [c.clientWidth, c.clientHeight]")
        assert 0 < size[0] <= PHONE["width"] and size[1] > 0, size
        assert "no preemptions" in (await page.inner_text("[data-plot-empty=preemptions]")).lower()
        # the header's links are reachable with Tab, and Enter follows them
        for label, ready in (("Queues", "tr[data-queue=team-a]"), ("Cluster", ".gpu.busy"),
                             ("Jobs", f"tr[data-job='{job_id}']")):
            await page.focus("a.brand")
            for _ in range(8):
                await page.keyboard.press("Tab")
                if (await page.evaluate("document.activeElement.textContent")).strip() == label:
                    break
            await page.keyboard.press("Enter")
            await page.wait_for_selector(ready, timeout=WAIT_MS)
            if label == "Queues":  # the queue's GPUs against its shares, and the job's wait for admission
                await page.wait_for_selector(".chart[data-plot=shares] canvas", timeout=WAIT_MS)
                await page.wait_for_selector("[data-testid=wait-table] tr[data-size='5-8']", timeout=WAIT_MS)
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"] + 1, f"{label} overflows a phone's width: {width}px"
        # the running job's page, with its Kubernetes objects and events, fits a phone's width too
        await page.goto(f"{url}/ui#/jobs/{job_id}")
        await page.wait_for_selector("[data-testid=kube-job] code", timeout=WAIT_MS)
        await page.wait_for_selector("[data-testid=events] li[data-kind=dispatched]", timeout=WAIT_MS)
        await page.wait_for_selector(".gantt rect.span[data-state=running][data-attempt='0']", timeout=WAIT_MS)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, f"the job page overflows a phone's width: {width}px"
        await page.goto(f"{url}/ui#/cluster")
        await page.wait_for_selector(f".gpu[href='#/jobs/{job_id}']")
        titles = await page.eval_on_selector_all(".gpu.busy[title]", "els => els.map(e => e.title)")
        assert sum(f"({job_id})" in t for t in titles) == 8
        # a change reaches the open page: cancel through the API, the GPUs free up
        await system.api.cancel(job_id)
        await page.wait_for_selector(f".gpu[href='#/jobs/{job_id}']", state="detached", timeout=WAIT_MS)
    assert console.problems == []
