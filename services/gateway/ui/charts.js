// Charts on uPlot (vendored): a Preact component that draws one and follows its container's width, the path
// builders of stacked areas, stacked bars and grouped bars, nice scale tops, number and time formats, and
// the palette every plot shares.

import uPlot from "./vendor/uPlot.esm.js";
import { html, useEffect, useRef } from "./vendor/htm-preact-standalone.js";

// Okabe and Ito's palette (told apart with most kinds of colour blindness), then an indigo
export const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#332288"];
export const OTHER_COLOUR = "#9aa4b1";
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
export const AXIS = {
  stroke: "#5b6470", font: FONT, labelFont: `600 ${FONT}`, labelSize: 20, labelGap: 2,
  grid: { stroke: "#e6e9ee", width: 1 }, ticks: { stroke: "#d8dee6", width: 1 },
};

export const colour = (index) => PALETTE[index % PALETTE.length];

/** A number as people read it: whole when whole, else two decimals at most. */
export function num(value) {
  if (value === null || value === undefined) return "–";
  return Number.isInteger(value) ? value.toLocaleString("en") : Number(value.toFixed(2)).toLocaleString("en");
}

/** A duration in seconds, short. */
export function duration(seconds) {
  if (seconds < 10) return `${Number(seconds.toFixed(1))} s`;
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** The smallest "nice" number (1, 2, 2.5, 5 times a power of ten) at least ``value``; 1 for nothing. */
export function niceTop(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}

/** Dates in UTC, as the rest of the dashboard shows them. */
export const utc = (seconds) => uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC");

export function stamp(seconds) {
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** Tick labels of a time axis in UTC, 24-hour: seconds shown when ticks are under a minute apart, the date when
a day or more. */
export function timeTicks(u, splits, axisIdx, space, incr) {
  return splits.map((seconds) => {
    const text = new Date(seconds * 1000).toISOString();
    if (incr < 60) return text.slice(11, 19);
    if (incr < 86400) return text.slice(11, 16);
    return text.slice(5, 10);
  });
}

/** A legend's value: at the cursor, else at ``rest`` (the latest step of a time series; blank when null). */
export function legendValue(format, rest = null) {
  return (u, v, si, idx) => {
    const at = idx ?? rest;
    if (at === null || at === undefined) return "";
    const value = u.data[si][at];
    return value === null || value === undefined ? "–" : format(value);
  };
}

/** Seconds since the epoch of ``points`` steps from the ISO time ``start``. */
export function steps(start, stepS, points) {
  const first = Date.parse(start) / 1000;
  return Array.from({ length: points }, (_, i) => first + i * stepS);
}

// ------------------------------------------------------------------ path builders (canvas pixels)

/** The value of every shown series before ``si`` at ``i``: where series ``si`` of a stack starts. */
function base(u, si, i, first) {
  let sum = 0;
  for (let k = first; k < si; k++) {
    if (u.series[k].show !== false) sum += u.data[k][i] || 0;
  }
  return sum;
}

/** Stacked areas of values that hold for a whole step: series ``first``.. sit on each other in order. */
export function stackedSteps(stepS, first = 1) {
  return (u, si, i0, i1) => {
    const xs = u.data[0];
    const top = new Path2D();
    const fill = new Path2D();
    const lower = [];
    for (let i = i0; i <= i1; i++) {
      const below = base(u, si, i, first);
      const y = u.valToPos(below + (u.data[si][i] || 0), "y", true);
      const x0 = u.valToPos(xs[i], "x", true);
      const x1 = u.valToPos(xs[i] + stepS, "x", true);
      if (i === i0) { top.moveTo(x0, y); fill.moveTo(x0, y); } else { top.lineTo(x0, y); fill.lineTo(x0, y); }
      top.lineTo(x1, y);
      fill.lineTo(x1, y);
      lower.push([x0, x1, u.valToPos(below, "y", true)]);
    }
    for (let j = lower.length - 1; j >= 0; j--) {
      const [x0, x1, y] = lower[j];
      fill.lineTo(x1, y);
      fill.lineTo(x0, y);
    }
    fill.closePath();
    return { stroke: top, fill, clip: null, band: null, gaps: null, flags: 0 };
  };
}

/** Stacked bars ``width`` x-units wide (``at``: "start" from x on, "centre" around x), 85% of it drawn. */
export function stackedBars(width, at = "centre", first = 1) {
  return (u, si, i0, i1) => {
    const xs = u.data[0];
    const fill = new Path2D();
    for (let i = i0; i <= i1; i++) {
      const value = u.data[si][i] || 0;
      if (!value) continue;
      const left = at === "start" ? xs[i] : xs[i] - width / 2;
      const x0 = u.valToPos(left + width * 0.075, "x", true);
      const x1 = u.valToPos(left + width * 0.925, "x", true);
      const below = base(u, si, i, first);
      const y0 = u.valToPos(below, "y", true);
      const y1 = u.valToPos(below + value, "y", true);
      fill.rect(x0, y1, Math.max(1, x1 - x0), y0 - y1);
    }
    return { stroke: fill, fill, clip: null, band: null, gaps: null, flags: 0 };
  };
}

/** Bars side by side around every x (one x-unit apart): this series' is the ``slot``-th of ``slots``. */
export function groupedBars(slot, slots) {
  return (u, si, i0, i1) => {
    const xs = u.data[0];
    const fill = new Path2D();
    const each = 0.8 / slots;
    for (let i = i0; i <= i1; i++) {
      const value = u.data[si][i];
      if (value === null || value === undefined) continue;
      const left = xs[i] - 0.4 + slot * each;
      const x0 = u.valToPos(left + each * 0.06, "x", true);
      const x1 = u.valToPos(left + each * 0.94, "x", true);
      const y0 = u.valToPos(0, "y", true);
      const y1 = u.valToPos(value, "y", true);
      fill.rect(x0, y1, Math.max(1, x1 - x0), Math.max(value > 0 ? 1 : 0, y0 - y1));
    }
    return { stroke: fill, fill, clip: null, band: null, gaps: null, flags: 0 };
  };
}

/** The x axis of categories 0..n-1 named ``labels``. */
export function categoryAxis(labels, label) {
  return {
    ...AXIS, label, splits: () => labels.map((_, i) => i), values: (u, splits) => splits.map((i) => labels[i] ?? ""),
    rotate: labels.length > 6 ? -30 : 0, size: labels.length > 6 ? 80 : 50, gap: 4,
  };
}

// ------------------------------------------------------------------ the component

const BASE = {
  cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false } },
  legend: { live: true },
};

/** A uPlot chart as wide as its container: ``make(width)`` returns its options, ``data`` its columns. */
export function Chart({ make, data, height = 240, name, summary }) {
  const box = useRef(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const width = () => Math.max(240, element.clientWidth || 0);
    const options = make(width());
    // hover points sit at a series' own value, not where a stack draws it: none
    const series = options.series.map((s, i) => (i ? { points: { show: false }, ...s } : s));
    const plot = new uPlot({ ...BASE, ...options, series, width: width(), height }, data, element);
    let last = width();
    const observer = new ResizeObserver(() => {
      const now = width();
      if (now !== last) { last = now; plot.setSize({ width: now, height }); }
    });
    observer.observe(element);
    return () => { observer.disconnect(); plot.destroy(); };
  }, [make, data, height]);
  return html`<div class="chart" ref=${box} data-plot=${name} aria-label=${summary}></div>`;
}
