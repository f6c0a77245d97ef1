// The energy panel: GET /sites/{ref}/energy over the chart's window, per hour
// (or per day for 7 d), as a table of kWh with self-consumption and autarky,
// and where each flow came from (the devices' counters or integrated power).

import { get, seg, withQuery } from "./api.js";
import { h, fill, num, iso } from "./format.js";

const FLOWS = [
  ["produced", "PV"],
  ["imported", "Import"],
  ["exported", "Export"],
  ["charged", "Charged"],
  ["discharged", "Discharged"],
];
const SOURCE_NAMES = { counter: "counter", integratedPower: "integrated power", mixed: "counter and integrated power", none: "no data" };
const hour = new Intl.DateTimeFormat(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit" });
const day = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short" });

/** The site's energy over `win` ({from, to}), per day when it spans days. */
export async function fetchEnergy(siteRef, win) {
  const interval = win.to - win.from > 2 * 86_400_000 ? "day" : "hour";
  return get(withQuery(`/sites/${seg(siteRef)}/energy`, { from: iso(win.from), to: iso(win.to), interval }));
}

const kwh = (v) => num(v, v < 10 ? 2 : 1);
const share = (v) => (v === null || v === undefined ? "–" : `${num(v * 100, 0)} %`);

function row(b, label, header) {
  const cell = header ? "th" : "td";
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, label),
    ...FLOWS.map(([k, name]) => h(cell, { "data-label": name, "data-flow": k }, kwh(b[k]))),
    h(cell, { "data-label": "Load" }, kwh(b.consumption)),
    h(cell, { "data-label": "Self-consumption" }, share(b.selfConsumption)),
    h(cell, { "data-label": "Autarky" }, share(b.autarky)),
  );
}

/** Renders the answer (or a problem's text) into `el`. */
export function renderEnergy(el, answer, error) {
  if (error) return fill(el, h("p", { class: "error-text" }, `GET energy: ${error}`));
  if (!answer.total) return fill(el, h("p", { class: "muted" }, "No energy stored in this range yet."));
  const fmt = answer.interval === "day" ? day : hour;
  const t = answer.total;
  const sources = FLOWS.map(([k, name]) => `${name}: ${SOURCE_NAMES[t.sources[k]] || t.sources[k]}`).join(" · ");
  const resets = t.counterResets ? ` · ${t.counterResets} counter reset(s) in this range` : "";
  fill(
    el,
    h(
      "p",
      { class: "energy-summary" },
      h("strong", {}, `${kwh(t.produced)} kWh`),
      " produced, ",
      h("strong", {}, `${kwh(t.consumption)} kWh`),
      ` used · self-consumption ${share(t.selfConsumption)} · autarky ${share(t.autarky)}`,
    ),
    h(
      "table",
      { class: "components energy-table" },
      h("caption", { class: "sr-only" }, `Energy per ${answer.interval}, kWh`),
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col" }, answer.interval === "day" ? "Day" : "Hour"), ...FLOWS.map(([, n]) => h("th", { scope: "col" }, n)), h("th", { scope: "col" }, "Load"), h("th", { scope: "col" }, "Self-cons."), h("th", { scope: "col" }, "Autarky")),
      ),
      h("tbody", {}, ...answer.buckets.map((b) => row(b, fmt.format(new Date(b.start)), false))),
      h("tfoot", {}, row(t, "Total", false)),
    ),
    h("p", { class: "muted small" }, `kWh. From: ${sources}${resets}.`),
  );
}
