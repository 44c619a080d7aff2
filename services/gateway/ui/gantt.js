// A job's timeline as a Gantt chart: a row per attempt, a bar for every state it spent time in (pending,
// admitted, running, preempting, suspended), from the job page's spans; SVG, with a time axis in UTC and a
// legend of the states drawn.

import { html, useEffect, useRef, useState } from "./vendor/htm-preact-standalone.js";
import { duration, stamp } from "./charts.js";

export const STATE_COLOURS = {
  pending: "#e0b100", admitted: "#56b4e9", running: "#1a7f37", preempting: "#d55e00", suspended: "#9aa4b1",
};
const TICK_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  172800, 604800];
const LEFT = 84;
const RIGHT = 16;
const TOP = 6;
const ROW = 28;
const BAR = 18;
const BOTTOM = 44;

function useWidth(ref, fallback) {
  const [width, setWidth] = useState(fallback);
  useEffect(() => {
    const element = ref.current;
    if (!element) return undefined;
    const measure = () => { if (element.clientWidth) setWidth(element.clientWidth); };
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  return width;
}

function tickLabel(seconds, step) {
  const text = new Date(seconds * 1000).toISOString();
  if (step < 60) return text.slice(11, 19);
  if (step < 86400) return text.slice(11, 16);
  return `${text.slice(5, 10)} ${text.slice(11, 16)}`;
}

const at = (iso) => Date.parse(iso) / 1000;

export function Gantt({ spans, finishedAt, finalState }) {
  const box = useRef(null);
  const width = useWidth(box, 640);
  if (!spans.length) {
    return html`<div ref=${box}><p class="empty" data-plot-empty="timeline">No state seen yet: the queue manager has not
      reported this job.</p></div>`;
  }
  const start = Math.min(...spans.map((s) => at(s.start)));
  const end = Math.max(...spans.map((s) => at(s.end)), finishedAt ? at(finishedAt) : 0, start + 1);
  const attempts = [...new Set(spans.map((s) => s.attempt))].sort((a, b) => a - b);
  const inner = Math.max(60, width - LEFT - RIGHT);
  const x = (seconds) => LEFT + ((seconds - start) / (end - start)) * inner;
  const y = (attempt) => TOP + attempts.indexOf(attempt) * ROW;
  const height = TOP + attempts.length * ROW + BOTTOM;
  const wanted = (end - start) / Math.max(2, Math.floor(inner / 90));
  const step = TICK_STEPS_S.find((s) => s >= wanted) || TICK_STEPS_S[TICK_STEPS_S.length - 1];
  const ticks = [];
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) ticks.push(t);
  const states = Object.keys(STATE_COLOURS).filter((state) => spans.some((s) => s.state === state));
  const axisY = TOP + attempts.length * ROW + 2;
  return html`
    <div class="gantt" ref=${box} data-plot="timeline">
      <svg viewBox=${`0 0 ${width} ${height}`} width="100%" height=${height} role="img"
           aria-label=${`the job's states over time: ${spans.map((s) => `attempt ${s.attempt} ${s.state} for ${duration(at(s.end) - at(s.start))}`).join(", ")}`}>
        ${attempts.map((attempt) => html`
          <text class="row-label" x=${LEFT - 8} y=${y(attempt) + ROW / 2 + 4} text-anchor="end">attempt ${attempt}</text>`)}
        ${ticks.map((t) => html`
          <line class="grid" x1=${x(t)} x2=${x(t)} y1=${TOP} y2=${axisY}></line>
          <line class="tick" x1=${x(t)} x2=${x(t)} y1=${axisY} y2=${axisY + 5}></line>
          <text class="tick-label" x=${x(t)} y=${axisY + 18} text-anchor="middle">${tickLabel(t, step)}</text>`)}
        <line class="axis" x1=${LEFT} x2=${LEFT + inner} y1=${axisY} y2=${axisY}></line>
        <text class="axis-label" x=${LEFT + inner / 2} y=${height - 4} text-anchor="middle">time (UTC)</text>
        ${spans.map((s) => {
          const x0 = x(at(s.start));
          const barWidth = Math.max(2, x(at(s.end)) - x0);
          const lasted = duration(at(s.end) - at(s.start));
          return html`
            <rect class="span" data-state=${s.state} data-attempt=${s.attempt} x=${x0} y=${y(s.attempt) + (ROW - BAR) / 2}
                  width=${barWidth} height=${BAR} fill=${STATE_COLOURS[s.state] || "#9aa4b1"}>
              <title>${`attempt ${s.attempt}: ${s.state}${s.reason ? ` (${s.reason})` : ""}, ${stamp(at(s.start))} to ${
                s.ongoing ? "now" : stamp(at(s.end))}, ${lasted}`}</title></rect>`;
        })}
        ${finishedAt && html`
          <line class="finish" x1=${x(at(finishedAt))} x2=${x(at(finishedAt))} y1=${TOP - 2} y2=${axisY}></line>`}
      </svg>
      <ul class="legend plot-legend" data-testid="timeline-legend">
        ${states.map((state) => html`<li><span class=${`swatch span-${state}`}></span>${state}</li>`)}
        ${finishedAt && html`<li><span class="swatch finish"></span>${finalState || "finished"} ${stamp(at(finishedAt))}</li>`}
      </ul>
    </div>`;
}
