// The dashboard's plots of aggregates the gateway computes (/v1/dashboard/plots and the pages' own reads):
// GPUs allocated per queue over time, preemptions over time, admissions per minute, each queue's GPUs in use
// against its fair share and nominal quota, and waits for first admission per size class. Each has axes
// with units and a legend, and says so in words when there is nothing to draw yet.

import { html, useMemo, useState } from "./vendor/htm-preact-standalone.js";
import {
  AXIS, Chart, OTHER_COLOUR, categoryAxis, colour, duration, groupedBars, legendValue, niceTop, num, stackedBars,
  stackedSteps, stamp, steps, timeTicks, utc,
} from "./charts.js";

const ACCENT = "#1f5fbf";
const TIME_AXIS = { ...AXIS, label: "time (UTC)", values: timeTicks };
const Y_AXIS = { ...AXIS, size: 50 };
/** A y axis of counts: whole-number ticks only. */
const COUNT_AXIS = { ...Y_AXIS, incrs: [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5] };
/** The x series of a time plot: its legend shows the step under the cursor, else the latest. */
const timeSeries = (rest) => ({ label: "time (UTC)", value: legendValue(stamp, rest) });

export function Empty({ name, children }) {
  return html`<p class="empty" data-plot-empty=${name}>${children}</p>`;
}

function perStep(stepS) {
  return stepS % 60 === 0 ? (stepS === 60 ? "minute" : `${stepS / 60} minutes`) : `${stepS} s`;
}

/** The rows of a series plot: its queues, then the other queues summed. */
function rows(plot) {
  const shown = plot.queues.map((q, i) => ({ label: q.queue, values: q.values, colour: colour(i) }));
  if (plot.other) {
    const n = plot.other_queues;
    shown.push({ label: `${n} other queue${n === 1 ? "" : "s"}`, values: plot.other, colour: OTHER_COLOUR });
  }
  return shown;
}

function stackTop(series, points, extra = 0) {
  let top = extra;
  for (let i = 0; i < points; i++) top = Math.max(top, series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  return niceTop(top * 1.05);
}

// ------------------------------------------------------------------ GPUs allocated per queue

export function AllocationPlot({ plot }) {
  const stacked = useMemo(() => rows(plot), [plot]);
  const xs = useMemo(() => steps(plot.start, plot.step_s, plot.points), [plot]);
  const capacity = plot.capacity > 0;
  const data = useMemo(() => [xs, ...stacked.map((s) => s.values), ...(capacity ? [xs.map(() => plot.capacity)] : [])],
    [plot]);
  const make = useMemo(() => () => ({
    tzDate: utc,
    scales: { x: { time: true, range: [xs[0], xs[xs.length - 1] + plot.step_s] },
      y: { range: [0, stackTop(stacked, plot.points, plot.capacity)] } },
    axes: [TIME_AXIS, { ...Y_AXIS, label: "GPUs allocated" }],
    series: [timeSeries(plot.points - 1),
      ...stacked.map((s) => ({ label: s.label, stroke: s.colour, fill: `${s.colour}bf`, width: 1,
        paths: stackedSteps(plot.step_s), value: legendValue((v) => `${num(v)} GPUs`, plot.points - 1) })),
      ...(capacity ? [{ label: "GPUs in the clusters", stroke: "#1b1f24", width: 1.5, dash: [6, 4],
        paths: stackedSteps(plot.step_s, stacked.length + 1), value: legendValue(num, plot.points - 1) }] : [])],
  }), [plot]);
  if (!stacked.length) {
    return html`<${Empty} name="allocation">No data yet: no queue held GPUs in this window.</${Empty}>`;
  }
  const now = stacked.map((s) => `${s.label} ${num(s.values[s.values.length - 1])}`).join(", ");
  return html`<${Chart} name="allocation" make=${make} data=${data} height=${260}
    summary=${`GPUs allocated per queue, stacked, every ${perStep(plot.step_s)}; now: ${now}`} />`;
}

// ------------------------------------------------------------------ preemptions over time

export function PreemptionPlot({ plot }) {
  const stacked = useMemo(() => rows(plot), [plot]);
  const xs = useMemo(() => steps(plot.start, plot.step_s, plot.points), [plot]);
  const data = useMemo(() => [xs, ...stacked.map((s) => s.values)], [plot]);
  const make = useMemo(() => () => ({
    tzDate: utc,
    scales: { x: { time: true, range: [xs[0], xs[xs.length - 1] + plot.step_s] },
      y: { range: [0, stackTop(stacked, plot.points)] } },
    axes: [TIME_AXIS, { ...COUNT_AXIS, label: `preemptions per ${perStep(plot.step_s)}` }],
    series: [timeSeries(plot.points - 1), ...stacked.map((s) => ({ label: s.label, stroke: s.colour, fill: s.colour,
      width: 0, paths: stackedBars(plot.step_s, "start"), value: legendValue(num, plot.points - 1) }))],
  }), [plot]);
  if (!plot.total) return html`<${Empty} name="preemptions">No preemptions in this window.</${Empty}>`;
  const reasons = Object.entries(plot.reasons).map(([reason, n]) => `${reason} ${n}`).join(", ");
  return html`
    <${Chart} name="preemptions" make=${make} data=${data} height=${220}
      summary=${`preemptions per queue, ${plot.total} in the window`} />
    <p class="muted small" data-testid="preemption-reasons">${
      `${plot.total} preemption${plot.total === 1 ? "" : "s"} in the window, by reason: ${reasons}`}</p>`;
}

// ------------------------------------------------------------------ admissions per minute

export function AdmissionsPlot({ asOf, counts }) {
  const xs = useMemo(() => {
    const minute = Math.floor(Date.parse(asOf) / 60000) * 60;
    return counts.map((_, i) => minute - (counts.length - 1 - i) * 60);
  }, [asOf, counts]);
  const data = useMemo(() => [xs, counts], [xs, counts]);
  const make = useMemo(() => () => ({
    tzDate: utc,
    scales: { x: { time: true, range: [xs[0], xs[xs.length - 1] + 60] }, y: { range: [0, niceTop(Math.max(...counts) * 1.05)] } },
    axes: [TIME_AXIS, { ...COUNT_AXIS, label: "jobs admitted per minute" }],
    series: [timeSeries(counts.length - 1), { label: "admissions", stroke: ACCENT, fill: ACCENT, width: 0,
      paths: stackedBars(60, "start"), value: legendValue(num, counts.length - 1) }],
  }), [xs, counts]);
  const total = counts.reduce((a, b) => a + b, 0);
  if (!total) return html`<${Empty} name="admissions">No job admitted in the last 15 minutes.</${Empty}>`;
  return html`<${Chart} name="admissions" make=${make} data=${data} height=${220}
    summary=${`admissions per minute, oldest first: ${counts.join(", ")}`} />`;
}

// ------------------------------------------------------------------ a queue's GPUs against its shares

const SHOWN_QUEUES = 20;

export function SharesPlot({ queues }) {
  const shown = useMemo(() => [...queues]
    .sort((a, b) => b.gpus_in_use - a.gpus_in_use || b.nominal_gpus - a.nominal_gpus || a.name.localeCompare(b.name))
    .slice(0, SHOWN_QUEUES), [queues]);
  const labels = shown.map((q) => q.name);
  const columns = [
    ["GPUs in use", shown.map((q) => q.gpus_in_use), colour(0)],
    ["fair share", shown.map((q) => q.fair_share_gpus ?? 0), colour(1)],
    ["nominal quota", shown.map((q) => q.nominal_gpus), "#5b6470"],
  ];
  const data = useMemo(() => [labels.map((_, i) => i), ...columns.map((c) => c[1])], [shown]);
  const make = useMemo(() => () => ({
    scales: { x: { time: false, range: [-0.5, labels.length - 0.5] },
      y: { range: [0, niceTop(Math.max(1, ...columns.flatMap((c) => c[1])) * 1.05)] } },
    axes: [categoryAxis(labels, "queue"), { ...Y_AXIS, label: "GPUs" }],
    series: [{ label: "queue", value: legendValue((i) => labels[i] ?? "") },
      ...columns.map(([label, , stroke], slot) => ({ label, stroke, fill: stroke, width: 0,
        paths: groupedBars(slot, columns.length), value: legendValue(num) }))],
  }), [shown]);
  if (!shown.length) return html`<${Empty} name="shares">No queues to show.</${Empty}>`;
  return html`
    <${Chart} name="shares" make=${make} data=${data} height=${240}
      summary=${`per queue GPUs in use, fair share and nominal quota: ${shown.map((q) =>
        `${q.name} ${q.gpus_in_use} / ${num(q.fair_share_gpus)} / ${q.nominal_gpus}`).join("; ")}`} />
    ${queues.length > shown.length && html`<p class="muted small">The ${shown.length} queues using the most GPUs of
      ${queues.length}; the table lists them all.</p>`}`;
}

// ------------------------------------------------------------------ waits for first admission

const SIZES = { 1: "1 GPU or less", "2-4": "2–4 GPUs", "5-8": "5–8 GPUs", ">8": "more than 8 GPUs" };
const SIZE_ORDER = ["1", "2-4", "5-8", ">8"];

function short(seconds) {
  if (seconds < 60) return [seconds, "s"];
  if (seconds < 3600) return [seconds / 60, "min"];
  return [seconds / 3600, "h"];
}

/** The histogram's bins in words: "<10 s", "10–30 s", "30 s–1 min", ..., "≥6 h". */
export function binLabels(bounds) {
  const labels = [`<${short(bounds[0]).join(" ")}`];
  for (let i = 1; i < bounds.length; i++) {
    const [a, unitA] = short(bounds[i - 1]);
    const [b, unitB] = short(bounds[i]);
    labels.push(unitA === unitB ? `${a}–${b} ${unitB}` : `${a} ${unitA}–${b} ${unitB}`);
  }
  labels.push(`≥${short(bounds[bounds.length - 1]).join(" ")}`);
  return labels;
}

export function WaitPlot({ plot }) {
  const [queue, setQueue] = useState("");
  const chosen = plot.queues.find((q) => `${q.tenant}/${q.queue}` === queue);
  const sizes = chosen ? chosen.sizes : plot.all_queues;
  const labels = useMemo(() => binLabels(plot.bounds_s), [plot]);
  const stacked = SIZE_ORDER.map((size, i) => ({ size, stats: sizes.find((s) => s.size === size), colour: colour(i) }))
    .filter((s) => s.stats);
  const data = useMemo(() => [labels.map((_, i) => i), ...stacked.map((s) => s.stats.counts)], [plot, queue]);
  const make = useMemo(() => () => ({
    scales: { x: { time: false, range: [-0.5, labels.length - 0.5] },
      y: { range: [0, stackTop(stacked.map((s) => ({ values: s.stats.counts })), labels.length)] } },
    axes: [categoryAxis(labels, "wait from submission to first admission"),
      { ...COUNT_AXIS, label: "jobs" }],
    series: [{ label: "waited", value: legendValue((i) => labels[i] ?? "") },
      ...stacked.map((s) => ({ label: SIZES[s.size], stroke: s.colour, fill: s.colour, width: 0,
        paths: stackedBars(1, "centre"), value: legendValue((v) => `${num(v)} jobs`) }))],
  }), [plot, queue]);
  const hours = plot.window_s / 3600;
  return html`
    <div class="plot-controls">
      <label>Queue <select name="wait-queue" value=${queue} onChange=${(e) => setQueue(e.target.value)}>
        <option value="">all queues</option>
        ${plot.queues.map((q) => html`<option value=${`${q.tenant}/${q.queue}`}>${q.queue}</option>`)}
      </select></label>
    </div>
    ${stacked.length === 0
      ? html`<${Empty} name="waits">No job was first admitted in the last ${hours} hours${chosen ? " in this queue" : ""}.</${Empty}>`
      : html`
        <${Chart} name="waits" make=${make} data=${data} height=${240}
          summary=${`jobs per wait for first admission, by size class${chosen ? `, queue ${chosen.queue}` : ""}`} />
        <div class="scroll"><table class="waits" data-testid="wait-table">
          <caption class="sr-only">Waits for first admission by size class</caption>
          <thead><tr><th scope="col">Size</th><th scope="col">Jobs</th><th scope="col">Mean</th>
            <th scope="col" title="half of the jobs waited at most this long">Median at most</th>
            <th scope="col" title="nine jobs in ten waited at most this long">90th percentile at most</th>
            <th scope="col">Longest</th></tr></thead>
          <tbody>${stacked.map(({ size, stats }) => html`
            <tr data-size=${size}><td>${SIZES[size]}</td><td class="num">${num(stats.jobs)}</td>
              <td>${duration(stats.mean_s)}</td><td>${duration(stats.p50_s)}</td><td>${duration(stats.p90_s)}</td>
              <td>${duration(stats.max_s)}</td></tr>`)}</tbody>
        </table></div>`}`;
}
