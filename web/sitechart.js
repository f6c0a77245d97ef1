// The site chart: PV, battery and grid power of the whole site stacked, with
// the load (derived: PV + grid + battery) as a line, the site's grid limits
// as dashed lines and the start and end of steering signals as marks. Drawn
// from the per-device activePower series the history already fetched.

import { h, s, fill, num } from "./format.js";

const LAYERS = [
  // [key, label, class]: above zero what supplies the load, below what it feeds.
  ["pv", "PV", "area-pv"],
  ["discharge", "Battery discharging", "area-battery"],
  ["import", "Grid import", "area-grid"],
  ["charge", "Battery charging", "area-battery neg"],
  ["export", "Grid export", "area-grid neg"],
];

/** Per bucket time: the site's PV, battery and grid power (W) and the load. */
export function siteSeries(devices, powerSeries) {
  const kind = new Map(devices.map((d) => [d.name, d.type]));
  const at = new Map();
  for (const ser of powerSeries) {
    const type = kind.get(ser.name);
    for (const [t, w] of ser.points) {
      if (w === null) continue;
      const p = at.get(t) || { t, pv: 0, battery: 0, grid: 0 };
      if (type === "inverter") p.pv += Math.max(0, w);
      else if (type === "battery") p.battery += w;
      else if (type === "meter") p.grid += w;
      at.set(t, p);
    }
  }
  return [...at.values()]
    .sort((a, b) => a.t - b.t)
    .map((p) => ({
      t: p.t,
      pv: p.pv,
      discharge: Math.max(0, p.battery),
      charge: Math.min(0, p.battery),
      import: Math.max(0, p.grid),
      export: Math.min(0, p.grid),
      load: p.pv + p.battery + p.grid,
    }));
}

/**
 * Draws into `figure` (a .plot and a .legend): opts = {from, to, step,
 * points: siteSeries(...), limits: {maxImport, maxExport} in W (either may be
 * absent), marks: [{t, label}]}.
 */
export function drawSiteChart(figure, opts) {
  const plot = figure.querySelector(".plot");
  const width = Math.max(280, Math.round(plot.clientWidth || 600));
  const height = width < 500 ? 210 : 260;
  const m = { l: 46, r: 10, t: 10, b: 26 };
  const iw = width - m.l - m.r;
  const ih = height - m.t - m.b;
  const pts = opts.points;
  const kw = (w) => w / 1000;
  const lim = opts.limits || {};
  const tops = pts.map((p) => kw(p.pv + p.discharge + p.import));
  const bottoms = pts.map((p) => kw(p.charge + p.export));
  let hi = Math.max(1, ...tops, ...pts.map((p) => kw(p.load)));
  let lo = Math.min(0, ...bottoms, ...pts.map((p) => kw(p.load)));
  // The grid limits are always in view: how far the site is from them is
  // what a technician looks for.
  const limitLines = [];
  if (lim.maxImport !== undefined) limitLines.push([kw(lim.maxImport), "import limit"]);
  if (lim.maxExport !== undefined) limitLines.push([-kw(lim.maxExport), "export limit"]);
  for (const [v] of limitLines) {
    hi = Math.max(hi, v);
    lo = Math.min(lo, v);
  }
  const x = (t) => m.l + ((t - opts.from) / (opts.to - opts.from)) * iw;
  const y = (v) => m.t + (1 - (v - lo) / (hi - lo)) * ih;
  // Each point is a bucket's mean: it holds from its start to the next.
  const edges = (t, v) => [t, Math.min(t + opts.step, opts.to)].map((u) => `${x(u).toFixed(1)},${y(v).toFixed(1)}`);
  const parts = [s("rect", { x: m.l, y: m.t, width: iw, height: ih, class: "frame" })];
  for (const v of [lo, 0, hi]) {
    parts.push(s("text", { x: m.l - 6, y: y(v).toFixed(1), class: "ylabel" }, num(v, 0)));
  }
  parts.push(s("line", { x1: m.l, x2: width - m.r, y1: y(0).toFixed(1), y2: y(0).toFixed(1), class: "zero" }));
  // Stacks: each layer from the running sum of the ones before it.
  const up = pts.map(() => 0);
  const down = pts.map(() => 0);
  for (const [key, label, cls] of LAYERS) {
    const below = key === "charge" || key === "export";
    const base = below ? down : up;
    const from = base.slice();
    pts.forEach((p, i) => (base[i] += kw(p[key])));
    if (!pts.some((p) => p[key] !== 0)) continue;
    const top = pts.flatMap((p, i) => edges(p.t, base[i]));
    const bottom = pts.flatMap((p, i) => edges(p.t, from[i])).reverse();
    parts.push(s("path", { d: `M${top.join("L")}L${bottom.join("L")}Z`, class: `area ${cls}`, "data-layer": key }, s("title", {}, label)));
  }
  if (pts.length) {
    const d = `M${pts.flatMap((p) => edges(p.t, kw(p.load))).join("L")}`;
    parts.push(s("path", { d, class: "series load-line", "data-layer": "load" }, s("title", {}, "Load")));
  }
  for (const [v, label] of limitLines) {
    const yy = y(v).toFixed(1);
    parts.push(s("line", { x1: m.l, x2: width - m.r, y1: yy, y2: yy, class: "limit-line", "data-limit": label }));
    parts.push(s("text", { x: width - m.r - 4, y: (y(v) - 3).toFixed(1), class: "xlabel end" }, `${label} ${num(Math.abs(v), 0)} kW`));
  }
  for (const mark of opts.marks || []) {
    if (mark.t < opts.from || mark.t > opts.to) continue;
    const xx = x(mark.t).toFixed(1);
    parts.push(s("line", { x1: xx, x2: xx, y1: m.t, y2: height - m.b, class: "steer-mark", "data-mark": mark.label }, s("title", {}, mark.label)));
  }
  const last = pts[pts.length - 1];
  const label = last
    ? `Site power (kW): PV ${num(kw(last.pv))}, load ${num(kw(last.load))}, grid ${num(kw(last.import + last.export))}, battery ${num(kw(last.discharge + last.charge))} at the latest point`
    : "Site power (kW): no data in this range yet";
  fill(plot, s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label, class: "chart-svg site-chart" }, s("text", { x: 4, y: m.t + 2, class: "unit" }, "kW"), parts));
  fill(
    figure.querySelector(".legend"),
    [...LAYERS.map(([, name, cls]) => h("li", {}, s("svg", { class: "swatch", viewBox: "0 0 14 10", width: 14, height: 10, "aria-hidden": "true" }, s("rect", { x: 0, y: 0, width: 14, height: 10, class: `area ${cls}` })), ` ${name}`)),
      h("li", {}, s("svg", { class: "swatch", viewBox: "0 0 28 10", width: 28, height: 10, "aria-hidden": "true" }, s("line", { x1: 1, y1: 5, x2: 27, y2: 5, class: "series load-line" })), " Load"),
      h("li", {}, s("svg", { class: "swatch", viewBox: "0 0 28 10", width: 28, height: 10, "aria-hidden": "true" }, s("line", { x1: 1, y1: 5, x2: 27, y2: 5, class: "limit-line" })), " Grid limit"),
      h("li", {}, s("svg", { class: "swatch", viewBox: "0 0 10 10", width: 10, height: 10, "aria-hidden": "true" }, s("line", { x1: 5, y1: 0, x2: 5, y2: 10, class: "steer-mark" })), " Steering signal starts and ends")],
  );
}

/** Steering marks from GET /sites/{ref}/steering: each component's validity. */
export function steeringMarks(st) {
  const names = { energyStorageSetting: "storage", productionCurtailment: "curtailment", maximizeGridImport: "maximize import", gridLimit: "grid limit" };
  const marks = [];
  for (const [k, name] of Object.entries(names)) {
    const c = st && st[k];
    if (!c) continue;
    if (c.validFrom) marks.push({ t: c.validFrom, label: `${name} from` });
    if (c.validUntil) marks.push({ t: c.validUntil, label: `${name} until` });
  }
  return marks;
}
