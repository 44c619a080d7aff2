// The Muster dashboard: sign-in, overview, jobs, one job, queues and cohorts, the GPU map, and their plots.
// Preact + htm and uPlot (vendored, no build step); every read goes through the gateway's API with the
// signed-in token, and the live stream (/v1/stream) keeps the open page current.

import { html, render, useCallback, useEffect, useMemo, useRef, useState } from "./vendor/htm-preact-standalone.js";
import { ApiError, get, onSignedOut, patch, post, qs, request, setToken, token } from "./api.js";
import { Gantt } from "./gantt.js";
import * as live from "./live.js";
import { AdmissionsPlot, AllocationPlot, PreemptionPlot, SharesPlot, WaitPlot } from "./plots.js";
import { MAX_NAME, deleteView, loadViews, saveView, viewKey, viewQuery } from "./views.js";

// ------------------------------------------------------------------ helpers

const STATES = ["submitted", "pending", "admitted", "running", "preempting", "suspended", "succeeded", "failed",
  "cancelled", "rejected"];

function ago(iso) {
  if (!iso) return "";
  const seconds = (Date.now() - Date.parse(iso)) / 1000;
  return `${span(Math.abs(seconds))} ${seconds >= 0 ? "ago" : "from now"}`;
}

function until(iso) {
  if (!iso) return "unknown";
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  return seconds <= 0 ? "now" : `in ${span(seconds)}`;
}

function span(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

function stamp(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

function percent(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value * 100)}%`;
}

/** Call ``fn`` at most once per ``ms`` (the last call is never lost). */
function useThrottle(fn, ms) {
  const last = useRef(0);
  const timer = useRef(null);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    if (timer.current) return;
    const wait = Math.max(0, last.current + ms - Date.now());
    timer.current = setTimeout(() => {
      timer.current = null;
      last.current = Date.now();
      latest.current();
    }, wait);
  }, [ms]);
}

/** Refetch ``path`` when it changes, on a stream reconnect and when ``events`` arrive (throttled), and every
``pollMs`` when given (a plot's "now" moves on while nothing happens). */
function useLiveResource(path, events, { throttleMs = 500, onEvent, pollMs } = {}) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const generation = useRef(0);
  const load = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const body = await get(path);
      if (mine === generation.current) { setData(body); setError(null); }
    } catch (err) {
      if (mine === generation.current) setError(err);
    }
  }, [path]);
  const refresh = useThrottle(load, throttleMs);
  useEffect(() => { load(); }, [load]);
  useEffect(() => {
    const offs = [live.on("ready", refresh)];
    for (const event of events) {
      offs.push(live.on(event, (payload) => {
        if (!onEvent || onEvent(payload, setData)) refresh();
      }));
    }
    return () => offs.forEach((off) => off());
  }, [refresh, events.join(",")]);
  useEffect(() => {
    if (!pollMs) return undefined;
    const timer = setInterval(refresh, pollMs);
    return () => clearInterval(timer);
  }, [refresh, pollMs]);
  return [data, error, setData];
}

function useHash() {
  const [hash, setHash] = useState(location.hash || "#/");
  useEffect(() => {
    const changed = () => setHash(location.hash || "#/");
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return hash;
}

function parseHash(hash) {
  const [path, search = ""] = hash.replace(/^#/, "").split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(search) };
}

const Badge = ({ state }) => html`<span class=${`badge state-${state}`}>${state}</span>`;

const Problem = ({ error }) => error
  ? html`<p class="error" role="alert">${error instanceof ApiError ? `${error.status}: ${error.message}` : String(error)}</p>`
  : null;

// ------------------------------------------------------------------ sign-in

function SignIn({ onSignedIn }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    try {
      const who = await request("GET", "/v1/dashboard/whoami", undefined, value.trim());
      setToken(value.trim());
      onSignedIn(who);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? "The gateway does not know this token." : String(err));
    } finally {
      setBusy(false);
    }
  };
  return html`
    <main id="main" class="signin">
      <h1>Muster</h1>
      <form onSubmit=${submit} aria-describedby="signin-help">
        <label for="token">API token</label>
        <input id="token" name="token" type="password" autocomplete="off" required autofocus
               value=${value} onInput=${(e) => setValue(e.target.value)} />
        <button type="submit" disabled=${busy || !value.trim()}>Sign in</button>
        <p id="signin-help" class="hint">A token of the gateway's tokens file (<code>muster up</code> writes them to
          <code>.muster/cli.yaml</code> and <code>.muster/tenant-tokens.yaml</code>). It is kept in this tab only and
          forgotten when the tab closes.</p>
        ${error && html`<p class="error" role="alert">${error}</p>`}
      </form>
    </main>`;
}

// ------------------------------------------------------------------ overview

const PLOT_WINDOWS = [[900, "15 minutes"], [3600, "1 hour"], [6 * 3600, "6 hours"]];

function Overview() {
  const [data, error] = useLiveResource("/v1/dashboard/overview", ["jobs", "nodes", "queues", "removed"],
    { throttleMs: 1000 });
  const [windowS, setWindowS] = useState(3600);
  const plotOptions = { throttleMs: 2000, pollMs: 15000 };
  const [allocation] = useLiveResource(`/v1/dashboard/plots/allocation?window_s=${windowS}`, ["jobs", "removed"],
    plotOptions);
  const [preemptions] = useLiveResource(`/v1/dashboard/plots/preemptions?window_s=${windowS}`, ["jobs"], plotOptions);
  if (!data) return html`<${Problem} error=${error} /><p class="loading">Loading…</p>`;
  return html`
    <h1>Overview</h1>
    <${Problem} error=${error} />
    <section aria-labelledby="by-state">
      <h2 id="by-state">Jobs by state</h2>
      <ul class="tiles">
        ${STATES.filter((s) => data.jobs_by_state[s]).map((s) => html`
          <li><a href=${`#/jobs?state=${s}`} class="tile" data-state=${s}>
            <span class="count" data-testid=${`count-${s}`}>${data.jobs_by_state[s]}</span><${Badge} state=${s} /></a></li>`)}
        ${Object.keys(data.jobs_by_state).length === 0 && html`<li class="muted">No jobs yet.</li>`}
      </ul>
    </section>
    <section aria-labelledby="gpus">
      <h2 id="gpus">GPUs</h2>
      <div class="scroll"><table>
        <thead><tr><th scope="col">Cluster</th><th scope="col">GPU type</th><th scope="col">Nodes</th>
          <th scope="col">Allocated</th><th scope="col">Free</th><th scope="col">Use</th></tr></thead>
        <tbody>${data.gpus.map((g) => html`
          <tr><td>${g.cluster}</td><td>${g.gpu_type}</td>
            <td>${g.nodes}${g.unhealthy_nodes ? html` <span class="warn">(${g.unhealthy_nodes} unavailable)</span>` : ""}</td>
            <td>${g.in_use} / ${g.allocatable}</td><td>${g.free}</td>
            <td><meter min="0" max=${g.allocatable || 1} value=${g.in_use}
                       aria-label=${`${g.in_use} of ${g.allocatable} allocated`}></meter></td></tr>`)}
        </tbody></table></div>
      ${data.gpus.length === 0 && html`<p class="muted">No nodes reported yet.</p>`}
    </section>
    <section aria-labelledby="allocated" class="plot">
      <div class="plot-head">
        <h2 id="allocated">GPUs allocated per queue</h2>
        <label>Window <select name="plot-window" value=${windowS} onChange=${(e) => setWindowS(Number(e.target.value))}>
          ${PLOT_WINDOWS.map(([seconds, label]) => html`<option value=${seconds}>${label}</option>`)}</select></label>
      </div>
      ${allocation ? html`<${AllocationPlot} plot=${allocation} />` : html`<p class="loading">Loading…</p>`}
    </section>
    <section aria-labelledby="preempted" class="plot">
      <h2 id="preempted">Preemptions</h2>
      ${preemptions ? html`<${PreemptionPlot} plot=${preemptions} />` : html`<p class="loading">Loading…</p>`}
    </section>
    <section aria-labelledby="admissions" class="plot">
      <h2 id="admissions">Admissions per minute (last 15 minutes)</h2>
      <${AdmissionsPlot} asOf=${data.as_of} counts=${data.admissions_per_minute} />
      <p class="muted">${`This minute: ${data.admissions_per_minute.at(-1)}; last 15 minutes: ${
        data.admissions_per_minute.reduce((a, b) => a + b, 0)}`}</p>
    </section>
    <section aria-labelledby="waits">
      <h2 id="waits">Queues waiting longest</h2>
      ${data.longest_waits.length === 0 ? html`<p class="muted">Nothing is waiting.</p>` : html`
      <div class="scroll"><table>
        <thead><tr><th scope="col">Queue</th><th scope="col">Tenant</th><th scope="col">Waiting jobs</th>
          <th scope="col">Oldest waits for</th></tr></thead>
        <tbody>${data.longest_waits.map((w) => html`
          <tr><td><a href=${`#/jobs?queue=${encodeURIComponent(w.queue)}&state=pending`}>${w.queue}</a></td>
            <td>${w.tenant}</td><td>${w.pending}</td><td>${span(w.oldest_wait_s)}</td></tr>`)}</tbody>
      </table></div>`}
    </section>`;
}

// ------------------------------------------------------------------ jobs table

const COLUMNS = [
  ["name", "Job"], ["tenant", "Tenant"], ["queue", "Queue"], [null, "User"], ["state", "State"],
  ["priority_class", "Priority"], ["gpus", "GPUs"], ["position", "Position / start"], [null, "Cluster"],
  ["submitted_at", "Submitted"],
];
const FILTERS = [["tenant", "Tenant"], ["queue", "Queue"], ["state", "State"], ["priority_class", "Priority"],
  ["cluster", "Cluster"], ["user", "User"]];
const PAGE = 50;

function jobsPath(params) {
  return `/v1/dashboard/jobs${qs(Object.fromEntries(params))}`;
}

function setParams(params, changes) {
  const next = new URLSearchParams(params);
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === "") next.delete(key);
    else next.set(key, String(value));
  }
  if (!("offset" in changes)) next.delete("offset");
  location.hash = `#/jobs${next.toString() ? `?${next}` : ""}`;
}

function SavedViews({ who, params }) {
  const [views, setViews] = useState(() => loadViews(who));
  const [naming, setNaming] = useState(false);
  const [name, setName] = useState("");
  const nameInput = useRef(null);
  const current = viewQuery(params);
  const selected = views.find((v) => v.query === current)?.name || "";
  useEffect(() => { if (naming && nameInput.current) nameInput.current.focus(); }, [naming]);
  useEffect(() => {  // views saved or deleted in another tab
    const changed = (event) => { if (event.key === viewKey(who)) setViews(loadViews(who)); };
    addEventListener("storage", changed);
    return () => removeEventListener("storage", changed);
  }, [who.tenant, who.user]);
  const pick = (chosen) => {
    const view = views.find((v) => v.name === chosen);
    if (view) location.hash = `#/jobs${view.query ? `?${view.query}` : ""}`;
  };
  const save = (event) => {
    event.preventDefault();
    if (!name.trim()) return;
    setViews(saveView(who, name.trim(), params));
    setNaming(false);
    setName("");
  };
  return html`
    <div class="views" role="group" aria-label="saved views">
      <label>Saved view
        <select name="view" value=${selected} onChange=${(e) => pick(e.target.value)}>
          <option value="">${views.length ? (selected ? "" : "choose…") : "none saved"}</option>
          ${views.map((v) => html`<option value=${v.name}>${v.name}</option>`)}
        </select></label>
      ${selected && html`
        <button type="button" class="danger" onClick=${() => setViews(deleteView(who, selected))}>Delete view</button>`}
      ${naming ? html`
        <form class="inline" onSubmit=${save}>
          <label>Name <input name="view-name" ref=${nameInput} value=${name} maxlength=${MAX_NAME} required
                             onInput=${(e) => setName(e.target.value)} /></label>
          <button type="submit" disabled=${!name.trim()}>Save</button>
          <button type="button" onClick=${() => setNaming(false)}>Cancel</button>
        </form>`
        : html`<button type="button" onClick=${() => setNaming(true)}>Save view…</button>`}
      <a class="share" href=${`#/jobs${current ? `?${current}` : ""}`}
         title="this view's address: copy it to share the view">Link to this view</a>
    </div>`;
}

function Jobs({ params, who }) {
  const path = jobsPath(params);
  const [text, setText] = useState(params.get("text") || "");
  useEffect(() => setText(params.get("text") || ""), [params.get("text")]);
  useEffect(() => {
    if (text === (params.get("text") || "")) return undefined;
    const timer = setTimeout(() => setParams(params, { text }), 250);
    return () => clearTimeout(timer);
  }, [text]);
  // a changed job on this page is patched at once; the page is read again for new and moved jobs
  const patchRows = (rows, setData) => {
    setData((page) => {
      if (!page) return page;
      const changed = new Map(rows.map((r) => [r.job_id, r]));
      let touched = false;
      const items = page.items.map((item) => {
        const row = changed.get(item.job_id);
        if (row && row.updated_at >= item.updated_at) { touched = true; return row; }
        return item;
      });
      return touched ? { ...page, items } : page;
    });
    return true;
  };
  const [page, error] = useLiveResource(path, ["jobs", "removed"],
    { throttleMs: 1000, onEvent: (payload, setData) => (Array.isArray(payload) && payload[0]?.job_id
      ? patchRows(payload, setData) : true) });
  const sort = params.get("sort") || "submitted_at";
  const descending = params.get("descending") !== "false";
  const group = params.get("group") || "";
  const offset = Number(params.get("offset") || 0);
  const limit = Number(params.get("limit") || PAGE);

  const sortBy = (column) => setParams(params, column === sort
    ? { descending: descending ? "false" : "true" } : { sort: column, descending: "true" });

  let lastGroup = null;
  const rows = [];
  if (page) {
    for (const job of page.items) {
      if (group) {
        const value = String(job[group]);
        if (value !== lastGroup) {
          lastGroup = value;
          rows.push(html`<tr class="group"><th colspan=${COLUMNS.length} scope="rowgroup">
            ${group}: ${value} <span class="muted">(${page.groups[value] ?? 0})</span></th></tr>`);
        }
      }
      rows.push(html`<${JobRow} job=${job} key=${job.job_id} />`);
    }
  }
  return html`
    <h1>Jobs</h1>
    <${SavedViews} who=${who} params=${params} />
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>Search <input type="search" value=${text} placeholder="id, name, reason"
                           onInput=${(e) => setText(e.target.value)} /></label>
      ${FILTERS.map(([name, label]) => html`
        <label>${label}
          <select name=${name} value=${params.get(name) || ""}
                  onChange=${(e) => setParams(params, { [name]: e.target.value })}>
            <option value="">all</option>
            ${(page ? page.facets[name] : []).concat(params.get(name) && page && !page.facets[name].includes(params.get(name))
              ? [params.get(name)] : []).map((v) => html`<option value=${v}>${v}</option>`)}
          </select></label>`)}
      <label>Group by
        <select name="group" value=${group} onChange=${(e) => setParams(params, { group: e.target.value })}>
          <option value="">nothing</option><option value="queue">queue</option><option value="state">state</option>
        </select></label>
    </form>
    <${Problem} error=${error} />
    <div class="scroll"><table class="jobs" aria-busy=${!page}>
      <caption class="sr-only">Jobs, sorted by ${sort} ${descending ? "descending" : "ascending"}</caption>
      <thead><tr>${COLUMNS.map(([key, label]) => html`
        <th scope="col" aria-sort=${key === sort ? (descending ? "descending" : "ascending") : undefined}>
          ${key ? html`<button type="button" class="sort" onClick=${() => sortBy(key)}>${label}
            ${key === sort ? (descending ? " ▼" : " ▲") : ""}</button>` : label}</th>`)}
      </tr></thead>
      <tbody>${rows}</tbody>
    </table></div>
    ${page && page.total === 0 && html`<p class="muted">No jobs match.</p>`}
    ${page && html`
      <nav class="pager" aria-label="pages">
        <button type="button" disabled=${offset === 0}
                onClick=${() => setParams(params, { offset: Math.max(0, offset - limit) || null })}>Previous</button>
        <span data-testid="range">${page.total ? `${offset + 1}–${Math.min(offset + limit, page.total)}` : "0"}${" of "}${page.total.toLocaleString("en")}</span>
        <button type="button" disabled=${offset + limit >= page.total}
                onClick=${() => setParams(params, { offset: offset + limit })}>Next</button>
      </nav>`}`;
}

function JobRow({ job }) {
  const where = job.state === "pending"
    ? `${job.position !== null && job.position !== undefined ? `position ${job.position + 1}` : ""} ${job.estimated_start ? `· starts ${until(job.estimated_start)}` : ""}`
    : "";
  return html`
    <tr data-job=${job.job_id} data-state=${job.state}>
      <td><a href=${`#/jobs/${encodeURIComponent(job.job_id)}`}>${job.name}</a><br /><small class="muted">${job.job_id}</small></td>
      <td>${job.tenant}</td><td>${job.queue}</td><td>${job.user || ""}</td>
      <td><${Badge} state=${job.state} />${job.reason ? html`<br /><small class="muted">${job.reason}</small>` : ""}</td>
      <td>${job.priority_class}</td><td class="num">${gpuText(job)}</td><td>${where.trim()}</td>
      <td>${job.cluster || ""}</td><td title=${stamp(job.submitted_at)}>${ago(job.submitted_at)}</td>
    </tr>`;
}

// A job's GPUs: whole GPUs, or a sharing job's charged share (fractions, MIG slices) marked "shared".
function gpuText(job) {
  if (job.gpu_share === null || job.gpu_share === undefined) return String(job.gpus);
  return `${Number(job.gpu_share.toFixed(2))} shared`;
}

// ------------------------------------------------------------------ one job

function JobPage({ jobId, who }) {
  const path = `/v1/dashboard/jobs/${encodeURIComponent(jobId)}`;
  const [detail, error] = useLiveResource(path, ["jobs", "removed"], {
    throttleMs: 300,
    pollMs: 15000, // the timeline's ongoing state grows while nothing happens
    onEvent: (payload) => Array.isArray(payload) && payload.some((r) => r === jobId || r.job_id === jobId),
  });
  if (!detail) return html`<${Problem} error=${error} />${!error && html`<p class="loading">Loading…</p>`}`;
  const job = detail.job;
  return html`
    <p><a href="#/jobs">← Jobs</a></p>
    <h1>${job.name} <${Badge} state=${job.state} /></h1>
    <p class="muted">${[job.job_id, `${job.tenant} / ${job.queue}`, job.user, job.priority_class,
      `${gpuText(job)} GPUs (${job.replicas} pods)`, `attempt ${job.attempt}`].filter(Boolean).join(" · ")}</p>
    ${job.roles && job.roles.length > 0 && html`<p class="muted" data-testid="roles">One gang of ${job.roles.map(
      (r) => `${r.name} ${r.replicas} × ${r.gpus_per_pod} GPU${r.gpus_per_pod === 1 ? "" : "s"}`).join(", ")}</p>`}
    <p class="summary" data-testid="summary">${detail.summary}</p>
    <${Problem} error=${error} />
    ${detail.actions.length > 0 && html`<${Actions} detail=${detail} who=${who} />`}
    <section aria-labelledby="timeline" class="plot">
      <h2 id="timeline">Timeline</h2>
      <${Gantt} spans=${detail.spans} finishedAt=${detail.finished_at}
        finalState=${["succeeded", "failed", "cancelled", "rejected"].includes(job.state) ? job.state : null} />
    </section>
    <div class="grid">
      <section aria-labelledby="why">
        <h2 id="why">${job.state === "pending" ? "Why it waits" : "Where it is"}</h2>
        <dl>
          <dt>Reason</dt><dd data-testid="reason">${job.reason || "–"}</dd>
          <dt>Message</dt><dd>${job.message || "–"}</dd>
          ${job.state === "pending" && html`
            <dt>Position</dt><dd data-testid="position">${job.position !== null && job.position !== undefined ? `${job.position + 1} (1 is next)` : "–"}</dd>
            <dt>Estimated start</dt>
            <dd data-testid="eta">${job.estimated_start ? html`${until(job.estimated_start)} <small class="muted">(${stamp(job.estimated_start)})</small>` : "unknown"}</dd>`}
          ${job.cluster && html`<dt>Cluster</dt><dd>${job.cluster}</dd>`}
          <dt>Submitted</dt><dd>${stamp(job.submitted_at)}</dd>
          ${detail.admitted_at && html`<dt>Admitted</dt><dd>${stamp(detail.admitted_at)}</dd>`}
          ${detail.finished_at && html`<dt>Finished</dt><dd>${stamp(detail.finished_at)}</dd>`}
        </dl>
      </section>
      <section aria-labelledby="history">
        <h2 id="history">History</h2>
        <ol class="timeline" data-testid="history">
          ${detail.history.map((h) => html`
            <li><${Badge} state=${h.state} /> <time datetime=${h.at}>${stamp(h.at)}</time>
              ${h.attempt ? html` <small>attempt ${h.attempt}</small>` : ""}
              ${h.reason && html`<br /><small class="muted">${h.reason}${h.message ? `: ${h.message}` : ""}</small>`}</li>`)}
        </ol>
      </section>
      <section aria-labelledby="placement">
        <h2 id="placement">Placement</h2>
        ${detail.placement ? html`
          <p>Cluster ${detail.placement.cluster}</p>
          <ul>${detail.placement.nodes.map((n) => html`<li>${n.node}: ${n.pods} pod${n.pods > 1 ? "s" : ""}</li>`)}</ul>`
          : html`<p class="muted">Not placed.</p>`}
      </section>
      <section aria-labelledby="charges">
        <h2 id="charges">Chargeback</h2>
        ${detail.charges.length ? html`
          <div class="scroll"><table>
            <thead><tr><th scope="col">Attempt</th><th scope="col">GPUs</th><th scope="col">GPU-hours</th>
              <th scope="col">Outcome</th></tr></thead>
            <tbody>${detail.charges.map((c) => html`<tr><td>${c.attempt}</td><td>${c.gpus} ${c.gpu_type}</td>
              <td>${(c.gpu_seconds / 3600).toFixed(3)}</td><td>${c.outcome}</td></tr>`)}</tbody>
          </table></div>
          <p>Total ${detail.gpu_hours} GPU-hours</p>` : html`<p class="muted">No finished attempt charged yet.</p>`}
      </section>
    </div>
    <section aria-labelledby="kube">
      <h2 id="kube">Kubernetes objects</h2>
      <${KubeObjects} attempts=${detail.attempts} />
    </section>
    <section aria-labelledby="events">
      <h2 id="events">Events</h2>
      ${detail.events.length ? html`<${Events} events=${detail.events} />` : html`<p class="muted">No events yet.</p>`}
    </section>
    <section aria-labelledby="spec">
      <h2 id="spec">Spec</h2>
      ${detail.spec ? html`<pre class="spec" tabindex="0">${JSON.stringify(detail.spec, null, 2)}</pre>`
        : html`<p class="muted">Not known to the gateway.</p>`}
    </section>`;
}

function KubeObjects({ attempts }) {
  if (!attempts.length) return html`<p class="muted">None yet: the job has not been placed on a cluster.</p>`;
  return html`<div class="attempts">${attempts.map((a) => html`
    <div class="attempt" data-attempt=${a.attempt}>
      <h3>Attempt ${a.attempt}</h3>
      <dl>
        <dt>Cluster</dt><dd data-testid="kube-cluster">${a.cluster}</dd>
        <dt>Namespace</dt><dd data-testid="kube-namespace">${a.namespace || "–"}</dd>
        <dt>Job</dt><dd data-testid="kube-job">${a.job_name ? html`<code>${a.job_name}</code>` : "not created yet"}
          ${a.job_names.length > 1 && html`<br /><small class="muted">before: ${a.job_names.slice(0, -1).join(", ")}</small>`}</dd>
        ${a.dispatched_at && html`<dt>Created</dt><dd>${stamp(a.dispatched_at)}</dd>`}
      </dl>
      ${a.pods.length > 0 && html`
        <div class="scroll"><table class="pods">
          <caption class="sr-only">Pods of attempt ${a.attempt}</caption>
          <thead><tr><th scope="col">Index</th><th scope="col">Pod</th><th scope="col">Node</th><th scope="col">GPUs</th></tr></thead>
          <tbody>${a.pods.map((p) => html`
            <tr data-pod=${p.name || ""} data-node=${p.node}>
              <td class="num">${p.index}</td>
              <td>${p.name ? html`<code>${p.name}</code>` : html`<span class="muted">not named yet</span>`}</td>
              <td>${p.node}</td>
              <td>${p.gpus}${p.nvlink_group !== null && p.nvlink_group !== undefined ? html` <small class="muted">NVLink group ${p.nvlink_group}</small>` : ""}</td>
            </tr>`)}</tbody>
        </table></div>
        <p class="muted small">${a.pods_source === "observed" ? "Pods as the node-state watcher saw them, all ready."
          : "The planned placement: pods are named once the node-state watcher sees the whole gang ready."}</p>`}
    </div>`)}</div>`;
}

const SOURCES = { queue_manager: "Muster", dispatcher: "dispatcher", node_watcher: "node watcher" };

function Events({ events }) {
  return html`
    <ol class="timeline events" data-testid="events">${events.map((e) => html`
      <li class=${e.warning ? "warning" : ""} data-kind=${e.kind} data-source=${e.source}>
        <time datetime=${e.at}>${stamp(e.at)}</time>${" "}
        ${e.kind === "state" ? html`<${Badge} state=${e.state} />${e.reason ? ` ${e.reason}` : ""}` : html`<strong>${e.reason || e.kind}</strong>`}
        ${e.classification && html` <span class=${`badge fault-${e.classification}`} title="whose fault the failure is">${e.classification}</span>`}
        ${" "}<small class="muted">${SOURCES[e.source] || e.source}${e.attempt ? ` · attempt ${e.attempt}` : ""}</small>
        ${e.message && html`<br /><span class=${e.warning ? "warn" : "muted"}>${e.message}</span>`}
        ${(e.pod || e.nodes.length > 0 || (e.exit_code !== null && e.exit_code !== undefined)) && html`<br /><small class="muted">${[
          e.pod && `pod ${e.pod}`, e.nodes.length > 0 && `node${e.nodes.length > 1 ? "s" : ""} ${e.nodes.join(", ")}`,
          e.exit_code !== null && e.exit_code !== undefined && `exit code ${e.exit_code}`].filter(Boolean).join(" · ")}</small>`}
      </li>`)}
    </ol>`;
}

function Actions({ detail }) {
  const job = detail.job;
  const [confirming, setConfirming] = useState(false);
  const [message, setMessage] = useState(null);
  const [classes, setClasses] = useState([]);
  const [priority, setPriority] = useState(job.priority_class);
  const [replicas, setReplicas] = useState(job.replicas);
  useEffect(() => {
    if (!detail.actions.includes("change_priority")) return;
    get("/v1/config").then((cfg) => setClasses(cfg.priority_classes.map((c) => c.name))).catch(() => setClasses([]));
  }, [job.job_id]);
  const base = `/v1/jobs/${encodeURIComponent(job.job_id)}`;
  const act = async (label, call) => {
    try {
      await call();
      setMessage({ ok: true, text: `${label} requested` });
    } catch (err) {
      setMessage({ ok: false, text: `${label} refused: ${err.message}` });
    }
    setConfirming(false);
  };
  const can = (action) => detail.actions.includes(action);
  return html`
    <section class="actions" aria-label="actions">
      ${can("cancel") && (confirming
        ? html`<span>Cancel this job?</span>
            <button type="button" class="danger" onClick=${() => act("cancel", () => post(`${base}/cancel`, { reason: "from the dashboard" }))}>Yes, cancel</button>
            <button type="button" onClick=${() => setConfirming(false)}>No</button>`
        : html`<button type="button" class="danger" onClick=${() => setConfirming(true)}>Cancel job</button>`)}
      ${can("suspend") && html`<button type="button" onClick=${() => act("suspend", () => post(`${base}/suspend`))}>Suspend</button>`}
      ${can("resume") && html`<button type="button" onClick=${() => act("resume", () => post(`${base}/resume`))}>Resume</button>`}
      ${can("change_priority") && classes.length > 0 && html`
        <form class="inline" onSubmit=${(e) => { e.preventDefault(); act("priority change", () => patch(base, { priority_class: priority })); }}>
          <label>Priority <select value=${priority} onChange=${(e) => setPriority(e.target.value)}>
            ${classes.map((c) => html`<option value=${c}>${c}</option>`)}</select></label>
          <button type="submit" disabled=${priority === job.priority_class}>Change</button>
        </form>`}
      ${can("scale") && html`
        <form class="inline" onSubmit=${(e) => { e.preventDefault(); act("scale", () => post(`${base}/scale`, { replicas: Number(replicas) })); }}>
          <label>Pods <input type="number" min="1" max="4096" value=${replicas} onInput=${(e) => setReplicas(e.target.value)} /></label>
          <button type="submit">Scale</button>
        </form>`}
      ${message && html`<p role="status" class=${message.ok ? "ok" : "error"}>${message.text}</p>`}
    </section>`;
}

// ------------------------------------------------------------------ queues and cohorts

function Queues() {
  const [data, error] = useLiveResource("/v1/dashboard/queues", ["queues", "jobs"], { throttleMs: 1000 });
  const [waits] = useLiveResource("/v1/dashboard/plots/waits", ["jobs"], { throttleMs: 5000, pollMs: 60000 });
  if (!data) return html`<${Problem} error=${error} /><p class="loading">Loading…</p>`;
  const byName = new Map(data.cohorts.map((c) => [c.name, c]));
  const roots = data.cohorts.filter((c) => !c.parent || !byName.has(c.parent));
  const Tree = ({ cohort }) => html`
    <li><strong>${cohort.name}</strong> <small class="muted">weight ${cohort.weight}</small>
      <ul>
        ${cohort.children.map((name) => byName.has(name) && html`<${Tree} cohort=${byName.get(name)} />`)}
        ${cohort.queues.map((q) => html`<li><a href=${`#/jobs?queue=${encodeURIComponent(q)}`}>${q}</a></li>`)}
      </ul></li>`;
  const loose = data.queues.filter((q) => !q.cohort);
  return html`
    <h1>Queues and cohorts</h1>
    <${Problem} error=${error} />
    <section aria-labelledby="tree"><h2 id="tree">Cohorts</h2>
      <ul class="tree">${roots.map((c) => html`<${Tree} cohort=${c} />`)}
        ${loose.length > 0 && html`<li><em>no cohort</em><ul>${loose.map((q) => html`<li>${q.name}</li>`)}</ul></li>`}</ul>
    </section>
    <section aria-labelledby="shares" class="plot"><h2 id="shares">GPUs in use, fair share and nominal quota</h2>
      <${SharesPlot} queues=${data.queues} />
      <p class="muted small">Fair share: the queue's weight over the weights of its cohort's busy queues, times the
        nominal GPUs of the whole cohort. GPUs in use include borrowed ones.</p>
    </section>
    <section aria-labelledby="waits-plot" class="plot"><h2 id="waits-plot">Waits for first admission${" "}
      ${waits && html`<small class="muted">(jobs first admitted in the last ${waits.window_s / 3600} hours)</small>`}</h2>
      ${waits ? html`<${WaitPlot} plot=${waits} />` : html`<p class="loading">Loading…</p>`}
    </section>
    <section aria-labelledby="queues"><h2 id="queues">Queues</h2>
      <div class="scroll"><table>
        <thead><tr><th scope="col">Queue</th><th scope="col">Quota (nominal / in use / borrowed / lent)</th>
          <th scope="col">Running</th><th scope="col">Waiting</th><th scope="col">Fair share</th>
          <th scope="col">Actual share</th><th scope="col">GPU-hours used</th></tr></thead>
        <tbody>${data.queues.map((q) => html`
          <tr data-queue=${q.name}>
            <td><a href=${`#/jobs?queue=${encodeURIComponent(q.name)}`}>${q.name}</a><br />
              <small class="muted">${q.tenant}${q.cohort ? ` · ${q.cohort}` : ""} · weight ${q.weight}</small></td>
            <td>${q.quotas.map((l) => html`<div>${l.resource}: ${l.nominal} / ${l.in_use} / ${l.borrowed} / ${l.lent}
              <meter min="0" max=${Math.max(l.nominal, l.in_use, 1)} value=${l.in_use} aria-label=${`${l.in_use} of ${l.nominal} nominal`}></meter></div>`)}</td>
            <td class="num">${q.running}</td><td class="num">${q.waiting}</td>
            <td>${percent(q.fair_share)}</td><td>${percent(q.actual_share)}</td>
            <td>${q.gpu_hours_used === null ? "–" : html`${q.gpu_hours_used}${q.gpu_hour_budget !== null ? ` of ${q.gpu_hour_budget}` : ""}
              <small class="muted"> per ${q.budget_window}</small>`}
              ${q.burst && html`<div class="small" data-burst>bought: ${q.burst.gpu_hours}${q.burst.gpu_hour_budget !== null ? ` of ${q.burst.gpu_hour_budget}` : ""} GPU-h${" "}
                · ${q.burst.money}${q.burst.money_budget !== null ? ` of ${q.burst.money_budget}` : ""}
                <small class="muted"> per ${q.burst.window}${q.burst.nodes_held > 0 ? ` · ${q.burst.nodes_held} nodes held` : ""}</small></div>`}</td>
          </tr>`)}</tbody>
      </table></div>
    </section>`;
}

// ------------------------------------------------------------------ the GPU map

function hue(jobId) {
  let h = 0;
  for (const ch of jobId) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return h % 8;
}

function Cluster() {
  const [data, error] = useLiveResource("/v1/dashboard/cluster", ["nodes", "jobs"], { throttleMs: 1000 });
  if (!data) return html`<${Problem} error=${error} /><p class="loading">Loading…</p>`;
  return html`
    <h1>Cluster</h1>
    <${Problem} error=${error} />
    <p class="legend"><span class="gpu free"></span> free <span class="gpu busy c0"></span> your jobs (a colour per job)
      <span class="gpu busy other"></span> in use by another tenant or unknown</p>
    ${data.racks.length === 0 && html`<p class="muted">No nodes reported yet.</p>`}
    ${data.racks.map((rack) => html`
      <section class="rack" aria-label=${`${rack.cluster} block ${rack.block} rack ${rack.rack}`}>
        <h2>${rack.cluster} <small class="muted">block ${rack.block || "–"} · rack ${rack.rack || "–"}</small></h2>
        <div class="nodes">${rack.nodes.map((node) => html`
          <div class=${`node${node.healthy && node.schedulable ? "" : " unhealthy"}`} data-node=${node.node}>
            <div class="node-name">${node.node} <small class="muted">${node.gpu_type}</small>
              ${!node.healthy && html`<small class="warn"> ${node.health_reason || "unhealthy"}</small>`}</div>
            <div class="gpus">${node.gpus.map((gpu, i) => {
              const label = gpu.job_id ? `GPU ${i}: ${gpu.name} (${gpu.job_id})` : `GPU ${i}: ${gpu.busy ? "in use" : "free"}`;
              const cls = `gpu ${gpu.busy ? "busy" : "free"} ${gpu.job_id ? `c${hue(gpu.job_id)}` : gpu.busy ? "other" : ""}`;
              return gpu.job_id
                ? html`<a class=${cls} href=${`#/jobs/${encodeURIComponent(gpu.job_id)}`} title=${label} aria-label=${label}></a>`
                : html`<span class=${cls} title=${label} role="img" aria-label=${label}></span>`;
            })}</div>
          </div>`)}</div>
      </section>`)}`;
}

// ------------------------------------------------------------------ the shell

const PAGES = [["", "Overview"], ["jobs", "Jobs"], ["queues", "Queues"], ["cluster", "Cluster"]];

function App() {
  const [who, setWho] = useState(null);
  const [checking, setChecking] = useState(Boolean(token()));
  const [connected, setConnected] = useState(false);
  const hash = useHash();
  const route = useMemo(() => parseHash(hash), [hash]);

  const signOut = useCallback(() => {
    live.stop();
    setToken(null);
    setWho(null);
  }, []);
  useEffect(() => onSignedOut(signOut), [signOut]);
  useEffect(() => live.on("unauthorized", signOut), [signOut]);
  useEffect(() => live.onStatus(setConnected), []);
  useEffect(() => {
    if (!token()) return;
    get("/v1/dashboard/whoami").then(setWho).catch(() => signOut()).finally(() => setChecking(false));
  }, []);
  useEffect(() => {
    if (who) live.start();
    return () => live.stop();
  }, [who]);
  const main = useRef(null);
  useEffect(() => { if (main.current) main.current.focus({ preventScroll: true }); }, [route.parts[0]]);

  if (checking) return html`<p class="loading">Signing in…</p>`;
  if (!who) return html`<${SignIn} onSignedIn=${setWho} />`;
  const [section, id] = route.parts;
  let page;
  if (section === "jobs" && id) page = html`<${JobPage} jobId=${id} who=${who} key=${id} />`;
  else if (section === "jobs") page = html`<${Jobs} params=${route.params} who=${who} />`;
  else if (section === "queues") page = html`<${Queues} />`;
  else if (section === "cluster") page = html`<${Cluster} />`;
  else page = html`<${Overview} />`;
  return html`
    <header>
      <a class="brand" href="#/">Muster</a>
      <nav aria-label="sections"><ul>${PAGES.map(([path, label]) => html`
        <li><a href=${`#/${path}`} aria-current=${(section || "") === path ? "page" : undefined}>${label}</a></li>`)}
      </ul></nav>
      <span class="live" data-testid="live" data-connected=${connected ? "yes" : "no"}
            title=${connected ? "live updates on" : "reconnecting"}>${connected ? "● live" : "○ offline"}</span>
      <span class="who" data-testid="who">${who.user} · ${who.tenant} · ${who.role}</span>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main id="main" tabindex="-1" ref=${main}>${page}</main>`;
}

const root = document.getElementById("app");
root.textContent = ""; // the static "Loading" note
render(html`<${App} />`, root);
