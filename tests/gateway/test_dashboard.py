"""The dashboard's read API (/v1/dashboard), the live stream (/v1/stream), the page at /ui and read-only roles."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest
import uvicorn

from schemas.capacity import NodeState, NodeStateObserved, NodeTopology
from schemas.decisions import NodePods, PlacementPlan
from schemas.envelope import Message, make_envelope
from schemas.intents import SubmitJob
from schemas.jobs import JobRecord, JobRecorded
from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from services.gateway.auth import Principal, TokenEntry, TokenTable
from services.gateway.dashboard_state import DashboardFeeds
from services.gateway.http import EmbeddedServer, bind, socket_url
from services.gateway.live import Change, LiveHub, StreamFilter, Subscription
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import T0, TOKENS, Harness, auth, status_changed
from tests.integration.builders import eventually

VIEWER = "token-vera-viewer-team-a"


def send(feed: object, message: Message) -> None:
    """Fold ``message`` through one of the dashboard's feeds, as the compacted table would."""
    assert callable(feed)
    feed(message.key(), make_envelope(message, "test"))


def record(job_id: str, *, tenant: str = "team-a", queue: str = "team-a", user: str = "alice", state: str = "running",
           nodes: dict[str, int] | None = None) -> JobRecorded:
    submission = SubmitJob(job_id=job_id, tenant=tenant, user=user, spec=job_spec(job_id, queue), submitted_at=T0)
    placed = [NodePods(node=n, pods=p) for n, p in (nodes or {}).items()]
    placement = PlacementPlan(cluster="east", nodes=placed) if placed else None
    return JobRecorded(job_id=job_id, queue=queue, record=JobRecord(
        submission=submission, priority=100, state=state, placement=placement, admitted_at=T0 if nodes else None))  # type: ignore[arg-type]


def node(name: str, *, in_use: int = 0, rack: str = "r0") -> NodeStateObserved:
    topology = NodeTopology(zone="z", block="b0", rack=rack)
    return NodeStateObserved(state=NodeState(cluster="east", node=name, gpu_type="a100", gpus_allocatable=8,
                                             gpus_in_use=in_use, topology=topology), observed_at=T0)


@pytest.fixture
def feeds(gw: Harness) -> DashboardFeeds:
    gw.ctx.tokens = TokenTable([*(TokenEntry(token=t, tenant=tn, user=u, role=r) for t, tn, u, r in (  # type: ignore[arg-type]
        (TOKENS["alice"], "team-a", "alice", "member"), (TOKENS["bob"], "team-b", "bob", "member"),
        (TOKENS["root"], "platform", "root", "admin"), (VIEWER, "team-a", "vera", "viewer")))])
    return gw.ctx.dashboard_feeds()


@pytest.fixture
def busy(gw: Harness, feeds: DashboardFeeds) -> Harness:
    """Three team-a jobs (one running on node-1), one team-b job on node-2, usage and a budget."""
    for i, state in enumerate(("running", "pending", "pending")):
        send(feeds.status, status_changed(f"a-{i}", name=f"train-{i}", state=state, minutes=i,
                                          position=None if state == "running" else i - 1,
                                          estimated_start=T0 + timedelta(hours=i) if state == "pending" else None))
    send(feeds.status, status_changed("b-0", tenant="team-b", queue="team-b", name="eval", state="running"))
    send(feeds.jobs, record("a-0", nodes={"node-1": 2}))
    send(feeds.jobs, record("a-1", state="pending"))
    send(feeds.jobs, record("b-0", tenant="team-b", queue="team-b", user="bob", nodes={"node-2": 1}))
    send(feeds.capacity, node("node-1", in_use=8))
    send(feeds.capacity, node("node-2", in_use=4, rack="r1"))
    send(feeds.usage, QueueUsageReported(queue="team-a", cohort="research", as_of=T0, allocated={"gpu:a100": 8},
                                         nominal={"gpu:a100": 16}, decayed_gpu_seconds=0, half_life_s=3600))
    send(feeds.usage, QueueUsageReported(queue="team-b", cohort="research", as_of=T0, allocated={"gpu:a100": 24},
                                         nominal={"gpu:a100": 16}, borrowed={"gpu:a100": 8}, decayed_gpu_seconds=0,
                                         half_life_s=3600))
    send(feeds.usage, BudgetStatusReported(tenant="team-a", window="month", window_start=T0, gpu_hours_used=12.5,
                                           gpu_hour_budget=100))
    send(feeds.usage, BurstSpendReported(queue="team-a", window="month", window_start=T0,
                                         window_end=T0 + timedelta(days=30), as_of=T0, gpu_hours=96.0, money=288.0,
                                         nodes_held=4))
    send(feeds.usage, ChargebackRecorded(job_id="a-0", attempt=0, tenant="team-a", queue="team-a", gpu_type="a100",
                                         gpus=8, started_at=T0, ended_at=T0 + timedelta(hours=1), gpu_seconds=28800,
                                         outcome="preempted"))
    return gw


async def test_whoami(client: httpx.AsyncClient, feeds: DashboardFeeds) -> None:
    body = (await client.get("/v1/dashboard/whoami", headers=auth("alice"))).json()
    assert body == {"tenant": "team-a", "user": "alice", "role": "member", "may_act": True}
    viewer = (await client.get("/v1/dashboard/whoami", headers={"Authorization": f"Bearer {VIEWER}"})).json()
    assert viewer["role"] == "viewer" and viewer["may_act"] is False
    assert (await client.get("/v1/dashboard/whoami")).status_code == 401


async def test_jobs_table_shows_a_member_only_its_tenant(client: httpx.AsyncClient, busy: Harness) -> None:
    alice = (await client.get("/v1/dashboard/jobs", headers=auth("alice"))).json()
    assert [j["job_id"] for j in alice["items"]] == ["a-2", "a-1", "a-0"]  # newest first
    assert alice["total"] == 3 and alice["facets"]["tenant"] == ["team-a"]
    assert alice["items"][2]["user"] == "alice"
    bob = (await client.get("/v1/dashboard/jobs", headers=auth("bob"))).json()
    assert [j["job_id"] for j in bob["items"]] == ["b-0"]
    root = (await client.get("/v1/dashboard/jobs", headers=auth("root"))).json()
    assert root["total"] == 4 and root["facets"]["user"] == ["alice", "bob"]


@pytest.mark.parametrize(("query", "expected"), [
    ({"state": "pending"}, ["a-2", "a-1"]),
    ({"user": "bob"}, ["b-0"]),
    ({"text": "EVAL"}, ["b-0"]),
    ({"cluster": "east"}, []),
    ({"tenant": "team-b"}, ["b-0"]),
    ({"sort": "name", "descending": "false"}, ["b-0", "a-0", "a-1", "a-2"]),
    ({"sort": "position", "descending": "false"}, ["a-1", "a-2", "a-0", "b-0"]),  # no position: last
    ({"sort": "estimated_start", "descending": "true"}, ["a-2", "a-1", "b-0", "a-0"]),  # ties by id, same way
    ({"limit": "2", "offset": "1"}, ["a-2", "a-1"]),
])
async def test_jobs_table_filters_sorts_and_pages(client: httpx.AsyncClient, busy: Harness,
                                                  query: dict[str, str], expected: list[str]) -> None:
    body = (await client.get("/v1/dashboard/jobs", params=query, headers=auth("root"))).json()
    assert [j["job_id"] for j in body["items"]] == expected


async def test_jobs_table_groups(client: httpx.AsyncClient, busy: Harness) -> None:
    body = (await client.get("/v1/dashboard/jobs", params={"group": "state"}, headers=auth("root"))).json()
    assert body["groups"] == {"pending": 2, "running": 2}
    assert [j["state"] for j in body["items"]] == ["pending", "pending", "running", "running"]
    member = await client.get("/v1/dashboard/jobs", params={"group": "tenant"}, headers=auth("alice"))
    assert member.status_code == 422


async def test_overview(client: httpx.AsyncClient, busy: Harness) -> None:
    busy.ctx.now = lambda: T0 + timedelta(minutes=3)
    body = (await client.get("/v1/dashboard/overview", headers=auth("alice"))).json()
    assert body["jobs_by_state"] == {"pending": 2, "running": 1}
    assert body["gpus"] == [{"cluster": "east", "gpu_type": "a100", "nodes": 2, "allocatable": 16, "in_use": 12,
                             "free": 4, "unhealthy_nodes": 0}]
    assert sum(body["admissions_per_minute"]) == 1  # team-b's admission is not alice's to see
    assert [(w["queue"], w["pending"], w["oldest_wait_s"]) for w in body["longest_waits"]] == [("team-a", 2, 180.0)]


async def test_queues_page(client: httpx.AsyncClient, busy: Harness) -> None:
    body = (await client.get("/v1/dashboard/queues", headers=auth("alice"))).json()
    assert [q["name"] for q in body["queues"]] == ["team-a", "team-a-ops"]
    team_a = body["queues"][0]
    [line] = team_a["quotas"]
    assert (line["nominal"], line["in_use"], line["borrowed"], line["lent"]) == (16, 8, 0, 8)
    assert (team_a["running"], team_a["waiting"], team_a["gpus_in_use"]) == (1, 2, 8)
    assert team_a["fair_share"] == 0.5 and team_a["actual_share"] == 0.25
    assert (team_a["gpu_hours_used"], team_a["gpu_hour_budget"], team_a["budget_window"]) == (12.5, 100, "month")
    assert team_a["burst"] == {"window": "month", "gpu_hours": 96.0, "money": 288.0, "nodes_held": 4,
                               "gpu_hour_budget": None, "money_budget": None}
    assert body["queues"][1]["burst"] is None  # no burst budget, nothing bought
    assert body["cohorts"] == [{"name": "research", "parent": None, "weight": 1.0, "queues": ["team-a"],
                                "children": []}]


async def test_gpu_map_hides_other_tenants_jobs(client: httpx.AsyncClient, busy: Harness) -> None:
    body = (await client.get("/v1/dashboard/cluster", headers=auth("alice"))).json()
    racks = {(r["cluster"], r["block"], r["rack"]): r["nodes"] for r in body["racks"]}
    assert set(racks) == {("east", "b0", "r0"), ("east", "b0", "r1")}
    [node1] = racks[("east", "b0", "r0")]
    assert [g["job_id"] for g in node1["gpus"]] == ["a-0"] * 8  # 2 pods x 4 GPUs
    [node2] = racks[("east", "b0", "r1")]
    assert [g["busy"] for g in node2["gpus"]] == [True] * 4 + [False] * 4
    assert {g["job_id"] for g in node2["gpus"]} == {None}  # bob's job, and GPUs nobody accounted for
    root = (await client.get("/v1/dashboard/cluster", headers=auth("root"))).json()
    assert root["racks"][1]["nodes"][0]["gpus"][0]["job_id"] == "b-0"


async def test_job_page(client: httpx.AsyncClient, busy: Harness) -> None:
    body = (await client.get("/v1/dashboard/jobs/a-0", headers=auth("alice"))).json()
    assert body["job"]["user"] == "alice" and body["spec"]["name"] == "a-0"
    assert body["placement"] == {"cluster": "east", "nodes": [{"node": "node-1", "pods": 2, "nvlink_groups": []}]}
    assert body["gpu_hours"] == 8.0 and body["charges"][0]["outcome"] == "preempted"
    assert body["actions"] == ["cancel", "suspend", "change_priority"]
    assert [h["state"] for h in body["history"]] == ["running"]
    pending = (await client.get("/v1/dashboard/jobs/a-2", headers=auth("alice"))).json()
    assert pending["summary"].startswith("pending at position 2 in queue team-a")  # 1 = next
    assert pending["job"]["estimated_start"] is not None
    assert (await client.get("/v1/dashboard/jobs/a-0", headers=auth("bob"))).status_code == 404
    viewer = (await client.get("/v1/dashboard/jobs/a-0", headers={"Authorization": f"Bearer {VIEWER}"})).json()
    assert viewer["actions"] == []


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/jobs/a-0/cancel", {}), ("POST", "/v1/jobs/a-0/suspend", None),
    ("PATCH", "/v1/jobs/a-0", {"priority_class": "high"}), ("POST", "/v1/jobs", {"name": "x"}),
    ("DELETE", "/v1/config/queues/team-a", None),
])
async def test_a_viewer_changes_nothing(client: httpx.AsyncClient, busy: Harness, method: str, path: str,
                                        body: dict[str, object] | None) -> None:
    r = await client.request(method, path, json=body, headers={"Authorization": f"Bearer {VIEWER}"})
    assert (r.status_code, r.json()["error"]) == (403, "read_only")
    assert busy.publisher.sent == []


async def test_the_page_is_served_with_its_own_files_only(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace('name="viewport"', "")  # nothing from elsewhere
    for path in ("/ui/static/app.js", "/ui/static/api.js", "/ui/static/live.js", "/ui/static/views.js",
                 "/ui/static/charts.js", "/ui/static/plots.js", "/ui/static/gantt.js", "/ui/static/style.css",
                 "/ui/static/vendor/htm-preact-standalone.js", "/ui/static/vendor/uPlot.min.css"):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert "https://" not in r.text and "//cdn" not in r.text, path
    uplot = await client.get("/ui/static/vendor/uPlot.esm.js")  # names its home page in comments only
    assert uplot.status_code == 200 and "import " not in uplot.text and "fetch(" not in uplot.text
    assert '<link rel="stylesheet" href="/ui/static/vendor/uPlot.min.css">' in page.text


def test_the_vendored_files_are_the_ones_their_readme_names() -> None:
    """Unmodified copies of the npm packages: each digest in ui/vendor/README.md matches its file."""
    import hashlib
    import re

    from services.gateway.dashboard import UI_DIR

    vendor = UI_DIR / "vendor"
    readme = (vendor / "README.md").read_text(encoding="utf-8")
    named = dict(re.findall(r"^\| `([\w.-]+)` \| `([0-9a-f]{64})` \|$", readme, re.MULTILINE))
    assert set(named) == {"htm-preact-standalone.js", "uPlot.esm.js", "uPlot.min.css"}
    for name, digest in named.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    for licence in ("LICENSE-htm", "LICENSE-preact", "LICENSE-uplot"):
        assert (vendor / licence).is_file()


def test_the_stream_is_documented() -> None:
    from tests.gateway.builders import harness

    operation = harness().app.openapi()["paths"]["/v1/stream"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert {p["name"] for p in operation["parameters"]} == {"kinds", "job_id", "queue", "tenant"}


# ---------------------------------------------------------------- the hub


def principal(tenant: str = "team-a", role: str = "member") -> object:
    from services.gateway.auth import Principal

    return Principal(tenant, "u", role)  # type: ignore[arg-type]


async def test_a_subscription_keeps_the_latest_change_per_object_it_may_see() -> None:
    hub = LiveHub()
    with hub.subscribe(principal(), StreamFilter()) as sub:  # type: ignore[arg-type]
        for i in range(100):
            hub.publish(Change("job", "a", f'{{"n":{i}}}', "team-a", {"queue": "q", "state": "running"}))
        hub.publish(Change("job", "b", "{}", "team-b", {"queue": "q"}))  # another tenant's
        hub.publish(Change("node", "east/n1", "{}"))
        assert sub.backlog == 2
        batch = await sub.next_batch(window_s=0)
        assert [(c.key, c.data) for c in batch] == [("a", '{"n":99}'), ("east/n1", "{}")]
    assert len(hub) == 0


async def test_filters_and_close() -> None:
    hub = LiveHub()
    wanted = StreamFilter(kinds=frozenset({"job"}), queue="q1")
    with hub.subscribe(principal(role="admin"), wanted) as sub:  # type: ignore[arg-type]
        hub.publish(Change("job", "a", "{}", "team-b", {"queue": "q2"}))
        hub.publish(Change("queue", "q1", "{}", "team-b"))
        hub.publish(Change("job", "b", "{}", "team-b", {"queue": "q1"}))
        assert [c.key for c in await sub.next_batch(window_s=0)] == ["b"]
        waiting = asyncio.create_task(sub.next_batch())
        await asyncio.sleep(0)  # one turn of the loop, no time: the task runs until it waits for a change
        assert not waiting.done()
        hub.close()
        assert await waiting == []


async def test_stream_over_http(served_dashboard: tuple[Harness, DashboardFeeds, str]) -> None:
    _, feeds, url = served_dashboard
    events: list[tuple[str, str]] = []
    async with httpx.AsyncClient(base_url=url, timeout=10) as http, \
            http.stream("GET", "/v1/stream", params={"kinds": "job"}, headers=auth("bob")) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((event, line.split(":", 1)[1].strip()))
                if event == "ready":
                    send(feeds.status, status_changed("a-9", state="pending"))  # alice's: not for bob
                    send(feeds.status, status_changed("b-9", tenant="team-b", queue="team-b", state="pending"))
                elif event == "jobs":
                    break
    assert [e for e, _ in events] == ["ready", "jobs"]
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        refused = await http.get("/v1/stream", params={"tenant": "team-a"}, headers=auth("bob"))
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert '"job_id":"b-9"' in events[1][1] and "a-9" not in events[1][1]
    assert '"state":"pending"' in events[1][1]


@pytest.fixture
async def served_dashboard(gw: Harness, feeds: DashboardFeeds) -> AsyncIterator[tuple[Harness, DashboardFeeds, str]]:
    """The app served by uvicorn in this loop (streams need a real server); the hub closed at the end."""
    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn.Config(gw.app, lifespan="off", log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield gw, feeds, socket_url(sock)
    finally:
        gw.ctx.dashboard.hub.close()
        server.should_exit = True
        await task
        sock.close()


#: the CLI's read of one job (``muster get``), as the gateway counts requests
READ_JOB = {"method": "GET", "route": "/v1/jobs/{job_id}", "code": "200"}


async def cli_has_read_the_job(gw: Harness) -> None:
    """Return once the CLI's stream is open and the CLI has read the job, which it does on the stream's
    ``ready`` event: a change sent from then on reaches it as a change, never in that first read."""
    hub = gw.ctx.dashboard.hub

    def read() -> bool:
        return len(hub) == 1 and (gw.registry.get_sample_value("muster_gateway_requests_total", READ_JOB) or 0) >= 1

    await eventually(read, within=10, what="the CLI's stream open and its read of the job answered")


def opened_streams(hub: LiveHub, monkeypatch: pytest.MonkeyPatch) -> list[Subscription]:
    """Every stream opened on ``hub`` from now on: what each has yet to send (``backlog``) is in sight."""
    streams: list[Subscription] = []
    subscribe = hub.subscribe

    @contextlib.contextmanager
    def recording(principal: Principal, wanted: StreamFilter) -> Iterator[Subscription]:
        with subscribe(principal, wanted) as subscription:
            streams.append(subscription)
            yield subscription

    monkeypatch.setattr(hub, "subscribe", recording)
    return streams


async def test_cli_get_and_list_watch(served_dashboard: tuple[Harness, DashboardFeeds, str]) -> None:
    from click.testing import CliRunner

    from services.cli.jobs import get, list_jobs

    _, feeds, url = served_dashboard
    hub = served_dashboard[0].ctx.dashboard.hub
    send(feeds.status, status_changed("a-1", state="pending", position=0))
    env = {"MUSTER_URL": url, "MUSTER_TOKEN": TOKENS["alice"], "MUSTER_CLI_CONFIG": ""}

    async def changes() -> None:
        await cli_has_read_the_job(served_dashboard[0])
        send(feeds.status, status_changed("b-1", tenant="team-b", queue="team-b", state="running"))  # not alice's
        send(feeds.status, status_changed("a-1", state="running", minutes=1))
        send(feeds.status, status_changed("a-1", state="succeeded", minutes=2))

    feeding = asyncio.create_task(changes())
    result = await asyncio.to_thread(CliRunner().invoke, get, ["a-1", "--watch"], env=env)
    await feeding
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "pending" in lines[1]  # the table first, then each change until the job finishes
    assert lines[-1].endswith("a-1  team-a  succeeded") and "b-1" not in result.output

    hub.close()  # the stream then ends after its first event: list --watch prints the table and returns
    listed = await asyncio.to_thread(CliRunner().invoke, list_jobs, ["--watch", "--all"], env=env)
    assert listed.exit_code == 0 and "a-1" in listed.output


@pytest.mark.parametrize("output", ["yaml", "json", "wide"])
async def test_cli_watch_prints_each_change_in_the_chosen_format(
    served_dashboard: tuple[Harness, DashboardFeeds, str], output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from services.cli.jobs import get

    gw, feeds, url = served_dashboard
    streams = opened_streams(gw.ctx.dashboard.hub, monkeypatch)
    send(feeds.status, status_changed("a-1", state="pending", position=0))
    env = {"MUSTER_URL": url, "MUSTER_TOKEN": TOKENS["alice"], "MUSTER_CLI_CONFIG": "", "COLUMNS": "250"}

    async def changes() -> None:
        await cli_has_read_the_job(gw)
        send(feeds.status, status_changed("a-1", state="running", cluster="east", minutes=1))
        # the stream keeps only the latest change of a job: the next one waits until this one is taken
        await eventually(lambda: streams[0].backlog == 0, within=10, what="the stream took the change to running")
        send(feeds.status, status_changed("a-1", state="succeeded", cluster="east", message="exit 0", minutes=2))

    feeding = asyncio.create_task(changes())
    result = await asyncio.to_thread(CliRunner().invoke, get, ["a-1", "--watch", "-o", output], env=env)
    await feeding
    assert result.exit_code == 0, result.output
    if output == "yaml":
        documents = list(yaml.safe_load_all(result.output))
        assert [d["state"] for d in documents] == ["pending", "running", "succeeded"]  # the read, then changes
        assert documents[-1]["cluster"] == "east" and documents[-1]["user"] is None
    elif output == "json":
        first, *changed = result.output.split("\n}\n")[0] + "\n}", result.output.split("\n}\n", 1)[1]
        assert json.loads(first)["state"] == "pending"
        assert [json.loads(line)["state"] for line in changed[0].splitlines()] == ["running", "succeeded"]
    else:
        lines = result.output.splitlines()
        assert "CLUSTER" in lines[0]
        assert lines[-1].endswith("  a-1  team-a  succeeded  attempt 0  cluster east  exit 0"), lines[-1]


# ---------------------------------------------------------------- Kubernetes objects and events


def run_reports(job_id: str = "a-0") -> list[Message]:
    """What the dispatcher and the node-state watcher report about attempt 0 of ``job_id`` on node-1, then
    an infrastructure failure and the stop of attempt 0, and attempt 1 dispatched elsewhere."""
    from schemas.runs import JobDispatched, JobStopped, PodBound, RunAllPodsReady, RunFailed, RunStarted

    base = {"job_id": job_id, "cluster": "east"}
    at = [T0 + timedelta(seconds=s) for s in range(10)]
    return [
        JobDispatched(**base, attempt=0, observed_at=at[1], namespace="team-a", object_name=f"{job_id}-a0"),
        RunStarted(**base, attempt=0, observed_at=at[2], pods_running=1, pods_total=2),
        RunAllPodsReady(**base, attempt=0, observed_at=at[3], pods_total=2, object_name=f"{job_id}-a0",
                        pods=[PodBound(name=f"{job_id}-a0-0-x1", index=0, node="node-1"),
                              PodBound(name=f"{job_id}-a0-1-x2", index=1, node="node-1")]),
        RunFailed(**base, attempt=0, observed_at=at[4], reason="NodeLost", message="node went away",
                  pod=f"{job_id}-a0-1-x2", classification="infrastructure", nodes=["node-1"]),
        JobStopped(**base, attempt=0, observed_at=at[5], reason="infrastructure_failure", requeue=True),
        JobDispatched(**base, attempt=1, observed_at=at[6], namespace="team-a", object_name=f"{job_id}-a1"),
    ]


async def test_job_events_show_the_kubernetes_objects_and_the_timeline(
    client: httpx.AsyncClient, busy: Harness, feeds: DashboardFeeds
) -> None:
    for message in run_reports():
        send(feeds.runs, message)
    body = (await client.get("/v1/jobs/a-0/events", headers=auth("alice"))).json()
    assert body["job_id"] == "a-0"
    newest, first = body["attempts"]
    assert (newest["attempt"], newest["job_name"], newest["namespace"], newest["pods"]) == (1, "a-0-a1", "team-a", [])
    assert (first["cluster"], first["namespace"], first["job_name"], first["pods_source"]) == (
        "east", "team-a", "a-0-a0", "observed")
    assert [(p["index"], p["name"], p["node"], p["gpus"]) for p in first["pods"]] == [
        (0, "a-0-a0-0-x1", "node-1", 4), (1, "a-0-a0-1-x2", "node-1", 4)]
    kinds = [(e["source"], e["kind"]) for e in body["events"]]
    assert kinds == [("queue_manager", "state"), ("dispatcher", "dispatched"), ("node_watcher", "started"),
                     ("node_watcher", "pods_ready"), ("node_watcher", "failed"), ("dispatcher", "stopped"),
                     ("dispatcher", "dispatched")]
    failed = body["events"][4]
    assert (failed["classification"], failed["nodes"], failed["pod"], failed["warning"]) == (
        "infrastructure", ["node-1"], "a-0-a0-1-x2", True)
    assert body["events"][0]["state"] == "running"

    # the job page carries the same, and an open stream is told so the page reads it again
    detail = (await client.get("/v1/dashboard/jobs/a-0", headers=auth("alice"))).json()
    assert detail["attempts"] == body["attempts"] and detail["events"] == body["events"]
    viewer = await client.get("/v1/jobs/a-0/events", headers={"Authorization": f"Bearer {VIEWER}"})
    assert viewer.status_code == 200
    root = await client.get("/v1/jobs/a-0/events", headers=auth("root"))
    assert root.json() == body


async def test_another_tenants_job_events_are_not_found(client: httpx.AsyncClient, busy: Harness,
                                                        feeds: DashboardFeeds) -> None:
    for message in run_reports():
        send(feeds.runs, message)
    for path in ("/v1/jobs/a-0/events", "/v1/dashboard/jobs/a-0"):
        r = await client.get(path, headers=auth("bob"))
        assert (r.status_code, r.json()["error"]) == (404, "not_found"), path
        assert "a-0-a0" not in r.text
    assert (await client.get("/v1/jobs/nope/events", headers=auth("root"))).status_code == 404
    assert (await client.get("/v1/jobs/a-0/events")).status_code == 401


async def test_pods_are_planned_until_the_watcher_names_them(client: httpx.AsyncClient, busy: Harness) -> None:
    body = (await client.get("/v1/jobs/a-0/events", headers=auth("alice"))).json()
    [attempt] = body["attempts"]
    assert (attempt["cluster"], attempt["namespace"], attempt["job_name"], attempt["pods_source"]) == (
        "east", None, None, "planned")
    assert [(p["index"], p["name"], p["node"]) for p in attempt["pods"]] == [(0, None, "node-1"), (1, None, "node-1")]
    pending = (await client.get("/v1/jobs/a-1/events", headers=auth("alice"))).json()
    assert pending["attempts"] == [] and [e["state"] for e in pending["events"]] == ["pending"]


async def test_run_reports_reach_an_open_job_page(busy: Harness, feeds: DashboardFeeds) -> None:
    hub = busy.ctx.dashboard.hub
    with hub.subscribe(principal(), StreamFilter(job_id="a-0")) as sub:  # type: ignore[arg-type]
        send(feeds.runs, run_reports()[0])
        [change] = await sub.next_batch(window_s=0)
    assert (change.kind, change.key) == ("job", "a-0")


def test_the_run_log_is_bounded_and_forgets_deleted_jobs(busy: Harness, feeds: DashboardFeeds) -> None:
    from services.gateway.job_runs import EVENTS_PER_JOB, RunLog
    from services.gateway.views import StatusView

    log = RunLog(max_jobs=2)
    for job_id in ("j-1", "j-2", "j-3"):
        log.apply(make_envelope(run_reports(job_id)[0], "test"))
    assert len(log) == 2 and "j-1" not in log
    for _ in range(EVENTS_PER_JOB + 5):
        log.apply(make_envelope(run_reports("j-3")[1], "test"))
    assert len(log.events("j-3", [], 1).events) == EVENTS_PER_JOB
    runs = busy.ctx.dashboard.runs
    send(feeds.runs, run_reports()[0])
    assert "a-0" in runs
    feeds.status("a-0", None)  # the job's status is deleted: its reports are forgotten
    assert "a-0" not in runs and isinstance(busy.ctx.status, StatusView)


def test_a_restarted_attempt_shows_its_new_job_and_planned_pods(busy: Harness, feeds: DashboardFeeds) -> None:
    from schemas.runs import JobDispatched

    for message in run_reports()[:3]:
        send(feeds.runs, message)
    send(feeds.runs, JobDispatched(job_id="a-0", attempt=0, cluster="east", observed_at=T0 + timedelta(minutes=5),
                                   namespace="team-a", object_name="a-0-a0-r1"))
    [attempt] = busy.ctx.job_events("a-0").attempts
    assert (attempt.job_name, attempt.job_names) == ("a-0-a0-r1", ["a-0-a0", "a-0-a0-r1"])
    assert attempt.pods_source == "planned" and {p.name for p in attempt.pods} == {None}


def test_the_events_endpoint_is_documented() -> None:
    from tests.gateway.builders import harness

    operation = harness().app.openapi()["paths"]["/v1/jobs/{job_id}/events"]["get"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/JobEvents"}
    assert {"401", "404"} <= set(operation["responses"]) and "node-state watcher" in operation["description"]
