// Building DOM nodes (never from HTML strings) and formatting numbers, powers,
// energies, times and durations for people.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: h("td", {class: "x"}, "text", otherNode). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

const numberFormats = new Map();
/** A number with at most `digits` fraction digits, in the page's locale. */
export function num(v, digits = 1) {
  let f = numberFormats.get(digits);
  if (!f) {
    f = new Intl.NumberFormat(undefined, { maximumFractionDigits: digits, minimumFractionDigits: 0 });
    numberFormats.set(digits, f);
  }
  return f.format(v);
}

/** Watts for people: "950 W", "12.3 kW", "1.25 MW". A minus sign is kept. */
export function power(w) {
  if (w === undefined || w === null || Number.isNaN(w)) return "–";
  const a = Math.abs(w);
  if (a >= 1e6) return `${num(w / 1e6, 2)} MW`;
  if (a >= 1e3) return `${num(w / 1e3, a >= 1e5 ? 0 : 1)} kW`;
  return `${num(w, 0)} W`;
}

/** Watt-hours for people: "950 Wh", "12.3 kWh", "4.56 MWh". */
export function energy(wh) {
  if (wh === undefined || wh === null || Number.isNaN(wh)) return "–";
  const a = Math.abs(wh);
  if (a >= 1e6) return `${num(wh / 1e6, 2)} MWh`;
  if (a >= 1e3) return `${num(wh / 1e3, 1)} kWh`;
  return `${num(wh, 0)} Wh`;
}

/** A value with its unit as the API gives it: {value, unit}. */
export function quantity(q) {
  if (!q || typeof q !== "object") return "–";
  if (q.unit === "W") return power(q.value);
  if (q.unit === "%") return `${num(q.value, 1)} %`;
  return `${num(q.value, 2)} ${q.unit || ""}`.trim();
}

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const dayTimeFormat = new Intl.DateTimeFormat(undefined, {
  weekday: "short",
  day: "numeric",
  month: "short",
  hour: "2-digit",
  minute: "2-digit",
});

/** Local clock time of an epoch-ms timestamp; with the day when it is not today. */
export function clock(ms, now = Date.now()) {
  if (ms === undefined || ms === null) return "–";
  const d = new Date(ms);
  const sameDay = new Date(now).toDateString() === d.toDateString();
  return sameDay ? timeFormat.format(d) : dayTimeFormat.format(d);
}

/** A duration for people: "45 s", "4 min 05 s", "2 h 10 min", "3 d 4 h". */
export function duration(ms) {
  const total = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(total / 86400);
  const hrs = Math.floor((total % 86400) / 3600);
  const min = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  if (d > 0) return `${d} d ${hrs} h`;
  if (hrs > 0) return `${hrs} h ${String(min).padStart(2, "0")} min`;
  if (min > 0) return `${min} min ${String(sec).padStart(2, "0")} s`;
  return `${sec} s`;
}

/** "12 s ago", "3 min 02 s ago", or "just now". */
export function ago(ms, now) {
  if (ms === undefined || ms === null) return "never";
  const dt = now - ms;
  if (dt < 1500) return "just now";
  return `${duration(dt)} ago`;
}

/** An ISO 8601 UTC string without milliseconds, as the time-series request takes. */
export function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}
