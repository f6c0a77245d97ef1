// Live values: the devices with their main measurements, and the site's power
// flow derived from them.

import { get, seg, withQuery } from "./api.js";
import { h, s, fill, power, energy, num, ago, clock } from "./format.js";

/** What each device type shows, in order: [property, label]. */
const ROWS = {
  inverter: [
    ["activePower", "Power"],
    ["activePowerLimit", "Production limit"],
    ["totalEnergyProduced", "Yield (lifetime)"],
    ["operatingState", "Operating state"],
  ],
  battery: [
    ["activePower", "Power"],
    ["soc", "State of charge"],
    ["totalEnergyProduced", "Discharged (lifetime)"],
    ["totalEnergyConsumed", "Charged (lifetime)"],
    ["operatingState", "Operating state"],
  ],
  meter: [
    ["activePower", "Power"],
    ["totalEnergyConsumed", "Imported (lifetime)"],
    ["totalEnergyProduced", "Exported (lifetime)"],
  ],
};

const TYPE_NAMES = { inverter: "PV inverter", battery: "Battery", meter: "Grid meter" };

/** Below this many watts a device counts as idle. */
const IDLE_W = 10;

/** Words for the direction of a device's active power (the signs of `docs/devices.md`). */
function direction(type, w) {
  if (w === undefined || w === null) return "";
  const idle = Math.abs(w) < IDLE_W;
  switch (type) {
    case "inverter":
      return idle ? "not producing" : w > 0 ? "producing" : "consuming";
    case "battery":
      return idle ? "idle" : w > 0 ? "discharging" : "charging";
    case "meter":
      return idle ? "balanced" : w > 0 ? "importing" : "exporting";
    default:
      return "";
  }
}

/**
 * The devices of a site (or all) with their latest values:
 * [{...device, values: {property: {value, unit, timestamp}}}].
 */
export async function fetchDevices(siteRef) {
  const devices = await get(withQuery("/devices", { site: siteRef || undefined }));
  await Promise.all(
    devices.map(async (d) => {
      d.values = {};
      const offered = new Set((d.properties || []).map((p) => p.property));
      const wanted = (ROWS[d.type] || ROWS.meter).map(([p]) => p).filter((p) => offered.has(p));
      if (!wanted.length) return;
      const path = withQuery(`/devices/${seg(d.deviceReference)}/measurements`, { properties: wanted.join(",") });
      const body = await get(path);
      for (const m of body.measurements || []) d.values[m.property] = m;
    }),
  );
  return devices;
}

function valueText(property, m) {
  if (!m) return "–";
  if (property === "activePower") return power(m.value);
  // The model's symbol where it names the code (docs/api.md), else the code.
  if (property === "operatingState") return m.state ? `${m.state} (${m.value})` : `code ${m.value}`;
  if (property.startsWith("totalEnergy")) return energy(m.value);
  if (m.unit === "%") return `${num(m.value, 1)} %`;
  return `${num(m.value, 2)} ${m.unit}`;
}

function row(device, property, label, now) {
  const m = device.values[property];
  const dd = h("dd", { "data-property": property }, valueText(property, m));
  if (m && property === "activePower") {
    dd.append(" ", h("span", { class: "dir" }, direction(device.type, m.value)));
  }
  if (m && property === "soc") {
    dd.append(" ", h("meter", { min: 0, max: 100, value: m.value, "aria-hidden": "true" }));
  }
  if (m && !device.status.online) {
    dd.append(" ", h("span", { class: "stale" }, `(from ${clock(m.timestamp, now)})`));
  }
  return [h("dt", {}, label), dd];
}

/** One card per device: name, type, online state, main values, last seen. */
export function renderDevices(container, devices, now) {
  if (!devices.length) {
    fill(container, h("p", { class: "empty" }, "No devices are configured for this site."));
    return;
  }
  fill(
    container,
    devices.map((d) => {
      const online = d.status && d.status.online;
      const rows = (ROWS[d.type] || ROWS.meter).filter(([p]) => (d.properties || []).some((x) => x.property === p));
      return h(
        "article",
        { class: `device ${d.type} ${online ? "online" : "offline"}`, "data-ref": d.deviceReference },
        h(
          "header",
          {},
          h("h3", {}, d.name),
          h("span", { class: "type" }, TYPE_NAMES[d.type] || d.type),
          h("span", { class: `state ${online ? "on" : "off"}` }, online ? "● Online" : "○ Offline"),
        ),
        rows.length
          ? h("dl", {}, rows.map(([p, label]) => row(d, p, label, now)))
          : h("p", { class: "empty" }, "No measurements yet."),
        h(
          "p",
          { class: "seen" },
          `${d.deviceReference} · last seen `,
          h("span", { "data-since": d.status && d.status.lastSeen }, ago(d.status && d.status.lastSeen, now)),
        ),
      );
    }),
  );
}

/**
 * The site's power flow in W from the devices' latest active power: PV (+
 * producing), battery (+ discharging), grid (+ importing) and the derived load
 * = grid + PV + battery. A part is null when no device of its type has a value.
 */
function flowTotals(devices) {
  const sum = (type) => {
    const vals = devices.filter((d) => d.type === type && d.values.activePower).map((d) => d.values.activePower.value);
    return vals.length ? vals.reduce((a, b) => a + b, 0) : null;
  };
  const pv = sum("inverter");
  const battery = sum("battery");
  const grid = sum("meter");
  const load = grid === null ? null : grid + (pv || 0) + (battery || 0);
  const socs = devices.filter((d) => d.type === "battery" && d.values.soc).map((d) => d.values.soc.value);
  const soc = socs.length ? socs.reduce((a, b) => a + b, 0) / socs.length : null;
  const missing = devices.filter((d) => !d.values.activePower).map((d) => d.name);
  const offline = devices.filter((d) => !(d.status && d.status.online)).map((d) => d.name);
  return { pv, battery, grid, load, soc, batteries: socs.length, missing, offline };
}

// Diagram geometry (viewBox units): the hub in the middle, a node at each side.
const HUB = { x: 200, y: 150 };
const NODES = {
  pv: { x: 200, y: 42, label: "PV" },
  battery: { x: 200, y: 258, label: "Battery" },
  grid: { x: 76, y: 150, label: "Grid" },
  load: { x: 324, y: 150, label: "Load" },
};
const NODE_W = 150;
const NODE_H = 76;

/** Where the line of a node meets the node's box and the hub. */
function ends(node) {
  const dx = Math.sign(HUB.x - node.x);
  const dy = Math.sign(HUB.y - node.y);
  const edge = { x: node.x + (dx * NODE_W) / 2, y: node.y + (dy * NODE_H) / 2 };
  const hub = { x: HUB.x - dx * 9, y: HUB.y - dy * 9 };
  return [edge, hub];
}

function flowLine(key, w, towardHubWhenPositive) {
  const [edge, hub] = ends(NODES[key]);
  const active = w !== null && Math.abs(w) >= IDLE_W;
  const inward = active && (w > 0) === towardHubWhenPositive;
  const [a, b] = inward ? [edge, hub] : [hub, edge];
  return s("line", {
    x1: a.x,
    y1: a.y,
    x2: b.x,
    y2: b.y,
    class: `link ${key} ${active ? "active" : "still"}`,
    "marker-end": active ? "url(#flow-arrow)" : null,
  });
}

function node(key, value, word) {
  const n = NODES[key];
  return s(
    "g",
    { class: `node ${key}` },
    s("rect", { x: n.x - NODE_W / 2, y: n.y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 10 }),
    s("text", { x: n.x, y: n.y - 14, class: "name" }, n.label),
    s("text", { x: n.x, y: n.y + 8, class: "value" }, value),
    s("text", { x: n.x, y: n.y + 27, class: "word" }, word),
  );
}

/** The flow diagram and its notes. */
export function renderFlow(container, devices) {
  const t = flowTotals(devices);
  const abs = (w) => (w === null ? "–" : power(Math.abs(w)));
  const words = {
    pv: t.pv === null ? "no inverter value" : direction("inverter", t.pv),
    battery: t.battery === null ? "no battery value" : direction("battery", t.battery),
    grid: t.grid === null ? "no grid meter" : direction("meter", t.grid),
    load: t.load === null ? "needs a grid meter" : "consuming (derived)",
  };
  if (t.soc !== null && t.battery !== null) {
    words.battery += ` · SoC ${num(t.soc, 0)} %`;
  }
  const summary =
    `PV ${abs(t.pv)} ${words.pv}; battery ${abs(t.battery)} ${words.battery}` +
    `${t.batteries > 1 ? " (mean of the batteries)" : ""}; ` +
    `grid ${abs(t.grid)} ${words.grid}; load ${t.load === null ? "unknown" : power(t.load)}.`;
  const svg = s(
    "svg",
    { viewBox: "0 0 400 300", role: "img", "aria-label": `Power flow: ${summary}`, class: "flow-diagram" },
    s(
      "defs",
      {},
      s(
        "marker",
        {
          id: "flow-arrow",
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 11,
          markerHeight: 11,
          markerUnits: "userSpaceOnUse",
          orient: "auto-start-reverse",
        },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }),
      ),
    ),
    flowLine("pv", t.pv, true),
    flowLine("battery", t.battery, true),
    flowLine("grid", t.grid, true),
    flowLine("load", t.load, false),
    s("circle", { cx: HUB.x, cy: HUB.y, r: 7, class: "hub" }),
    node("pv", abs(t.pv), words.pv),
    node("battery", abs(t.battery), words.battery),
    node("grid", abs(t.grid), words.grid),
    node("load", t.load === null ? "–" : power(t.load), words.load),
  );
  const notes = [];
  if (t.offline.length) notes.push(h("p", { class: "warn" }, `Offline, last known values used: ${t.offline.join(", ")}.`));
  if (t.missing.length) notes.push(h("p", { class: "warn" }, `No power value yet: ${t.missing.join(", ")}.`));
  fill(container, svg, notes);
}
