// History charts: time series from the agent's store, drawn as hand-written SVG.

import { post, seg } from "./api.js";
import { h, s, fill, num, iso } from "./format.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/**
 * The selectable ranges. The resolution keeps every series at or below ~300
 * points (one request per device and property), whatever the range.
 */
export const RANGES = {
  "1h": { label: "1 h", span: HOUR, resolution: { value: 30, unit: "s" }, step: 30_000 },
  "6h": { label: "6 h", span: 6 * HOUR, resolution: { value: 2, unit: "min" }, step: 2 * MIN },
  "24h": { label: "24 h", span: DAY, resolution: { value: 5, unit: "min" }, step: 5 * MIN },
  "7d": { label: "7 d", span: 7 * DAY, resolution: { value: 1, unit: "h" }, step: HOUR },
};

/** The window of a range ending now, aligned to its buckets: {from, to}. */
export function windowOf(range, now) {
  const to = Math.ceil(now / range.step) * range.step;
  return { from: to - range.span, to };
}

/** One series: [[epochMs, value], ...] ascending. */
export async function fetchSeries(deviceRef, property, range, win) {
  const body = await post(`/devices/${seg(deviceRef)}/measurements/time-series`, {
    property,
    range: { type: "absolute", start: iso(win.from), end: iso(win.to) },
    resolution: range.resolution,
  });
  return (body.time || []).map((t, i) => [Date.parse(t), body.data[i]]);
}

/** Round steps for axis ticks: 1, 2, 2.5 or 5 times a power of ten. */
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

const TIME_STEPS = [5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY];
const hm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const day = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric" });

function timeTicks(from, to, maxTicks) {
  const step = TIME_STEPS.find((t) => (to - from) / t <= maxTicks) || 7 * DAY;
  // Align to local midnight, so that "06:00" means six in the morning here.
  const tz = -new Date(from).getTimezoneOffset() * MIN;
  const ticks = [];
  for (let t = Math.ceil((from + tz) / step) * step - tz; t <= to; t += step) ticks.push(t);
  const fmt = step >= DAY ? day : hm;
  return ticks.map((t) => [t, fmt.format(new Date(t))]);
}

/** Splits points into runs without gaps longer than 2.5 buckets. */
function runs(points, step) {
  const out = [];
  let cur = [];
  for (const p of points) {
    if (cur.length && p[0] - cur[cur.length - 1][0] > 2.5 * step) {
      out.push(cur);
      cur = [];
    }
    cur.push(p);
  }
  if (cur.length) out.push(cur);
  return out;
}

/**
 * Draws series into `figure` (a <figure> holding a .plot and a .legend):
 * opts = {label, from, to, step, unit, scale, min?, max?, series: [{name, points, error?}]}.
 * Values are divided by `scale` (W to kW). Each series has its colour and its
 * own dash pattern, and the legend names it, so colour is never the only cue.
 */
export function drawChart(figure, opts) {
  const plot = figure.querySelector(".plot");
  const legend = figure.querySelector(".legend");
  const width = Math.max(280, Math.round(plot.clientWidth || 600));
  const height = width < 500 ? 190 : 240;
  const m = { l: 46, r: 10, t: 10, b: 26 };
  const iw = width - m.l - m.r;
  const ih = height - m.t - m.b;
  const scale = opts.scale || 1;
  const all = opts.series.flatMap((x) => x.points.map((p) => p[1] / scale));
  let lo = opts.min !== undefined ? opts.min : Math.min(0, ...all);
  let hi = opts.max !== undefined ? opts.max : Math.max(0, ...all);
  if (!(hi > lo)) {
    lo = Math.min(lo, 0);
    hi = lo + 1;
  }
  const yStep = niceStep((hi - lo) / 4);
  if (opts.min === undefined) lo = Math.floor(lo / yStep) * yStep;
  if (opts.max === undefined) hi = Math.ceil(hi / yStep) * yStep;
  const x = (t) => m.l + ((t - opts.from) / (opts.to - opts.from)) * iw;
  const y = (v) => m.t + (1 - (v - lo) / (hi - lo)) * ih;

  const grid = [];
  for (let v = lo; v <= hi + yStep / 1e6; v += yStep) {
    const yy = y(v).toFixed(1);
    grid.push(s("line", { x1: m.l, x2: width - m.r, y1: yy, y2: yy, class: Math.abs(v) < yStep / 1e6 ? "zero" : "grid" }));
    grid.push(s("text", { x: m.l - 6, y: yy, class: "ylabel" }, num(v, yStep < 1 ? 1 : 0)));
  }
  for (const [t, label] of timeTicks(opts.from, opts.to, Math.max(2, Math.floor(iw / 90)))) {
    const xx = x(t).toFixed(1);
    grid.push(s("line", { x1: xx, x2: xx, y1: m.t, y2: height - m.b, class: "grid" }));
    // Labels near an edge are anchored to it, so that none is cut off.
    const edge = x(t) > width - m.r - 28 ? " end" : x(t) < m.l + 28 ? " start" : "";
    grid.push(s("text", { x: xx, y: height - 8, class: `xlabel${edge}` }, label));
  }

  const lines = [];
  opts.series.forEach((ser, i) => {
    for (const r of runs(ser.points, opts.step)) {
      if (r.length === 1) {
        lines.push(s("circle", { cx: x(r[0][0]).toFixed(1), cy: y(r[0][1] / scale).toFixed(1), r: 2.5, class: `dot s${i % 6}` }));
        continue;
      }
      const d = r.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1] / scale).toFixed(1)}`).join("");
      lines.push(s("path", { d, class: `series s${i % 6}`, "data-series": ser.name }, s("title", {}, ser.name)));
    }
  });

  const described = opts.series
    .map((ser) => {
      if (!ser.points.length) return `${ser.name}: no data`;
      const vals = ser.points.map((p) => p[1] / scale);
      return `${ser.name}: latest ${num(vals[vals.length - 1])} ${opts.unit}, min ${num(Math.min(...vals))}, max ${num(Math.max(...vals))}`;
    })
    .join("; ");
  const empty = !opts.series.some((ser) => ser.points.length);
  const svg = s(
    "svg",
    {
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": `${opts.label} (${opts.unit}). ${empty ? "No data in this range yet." : described}`,
      class: "chart-svg",
    },
    s("text", { x: 4, y: m.t + 2, class: "unit" }, opts.unit),
    grid,
    s("rect", { x: m.l, y: m.t, width: iw, height: ih, class: "frame" }),
    lines,
    empty ? s("text", { x: m.l + iw / 2, y: m.t + ih / 2, class: "nodata" }, "No data in this range yet") : null,
  );
  fill(plot, svg);
  fill(
    legend,
    opts.series.map((ser, i) => {
      const last = ser.points.length ? ser.points[ser.points.length - 1][1] / scale : null;
      return h(
        "li",
        {},
        s("svg", { class: "swatch", viewBox: "0 0 28 10", width: 28, height: 10, "aria-hidden": "true" }, s("line", { x1: 1, y1: 5, x2: 27, y2: 5, class: `series s${i % 6}` })),
        ` ${ser.name}`,
        ser.error ? h("span", { class: "error-text" }, ` (${ser.error})`) : last !== null ? h("span", { class: "muted" }, ` ${num(last)} ${opts.unit}`) : h("span", { class: "muted" }, " no data"),
      );
    }),
  );
}
