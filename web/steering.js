// Site steering: which scope the token has, the combined signal with each
// component's validity counting down, what each device was told, and the form
// that sends a manual signal after a confirmation step.

import { ApiProblem, del, get, post, seg, serverNow, withQuery } from "./api.js";
import { h, fill, num, quantity, clock, duration } from "./format.js";

/**
 * Finds out, without changing anything, whether the token may steer: a dry run
 * of a harmless valid request (`openapi.json`: `?dryRun=true` validates and changes
 * nothing). 403 means read-only. Returns {scope: "steer" | "read" | "none", problem?}.
 */
export async function probeScope(siteRef) {
  const body = { maximizeGridImport: false, validUntil: serverNow() + 60_000 };
  try {
    await post(withQuery(`/sites/${seg(siteRef)}/steering`, { dryRun: "true" }), body);
    return { scope: "steer" };
  } catch (e) {
    if (!(e instanceof ApiProblem)) throw e;
    if (e.status === 403) return { scope: "read", problem: e };
    // The scope layer answers before the body is read, so a refused body still
    // means the token may steer.
    if (e.status === 400) return { scope: "steer" };
    if (e.status === 401) throw e;
    return { scope: "none", problem: e };
  }
}

export const fetchState = (siteRef) => get(`/sites/${seg(siteRef)}/steering`);

const COMPONENTS = [
  ["ess", "energyStorageSetting", "Energy storage"],
  ["curtailment", "productionCurtailment", "Production curtailment"],
  ["maximizeGridImport", "maximizeGridImport", "Maximize grid import"],
  ["gridLimit", "gridLimit", "Grid limits"],
];

/** An ESS setting in words (positive discharges, negative charges). */
function essText(setting) {
  if (!setting) return "–";
  if (setting.mode === "idle") return "Idle (0 W at every battery)";
  const w = toWatts(setting);
  let text = w === 0 ? "0 W" : `${w > 0 ? "Discharge" : "Charge"} ${quantity({ value: Math.abs(setting.value), unit: setting.unit })}`;
  if (setting.untilSoc !== undefined) text += ` until SoC ${num(setting.untilSoc, 0)} %`;
  return text;
}

function curtailmentText(setting) {
  if (!setting) return "–";
  const v = quantity(setting);
  return setting.unit === "%" ? `Production at most ${v} of rated` : `Production at most ${v}`;
}

function mgiText(value) {
  return value ? "On: storage charges, production is limited, import kept within max import" : "Off";
}

/** Temporary grid limits in words; an absent member keeps the configured limit. */
function gridLimitText(setting) {
  if (!setting) return "–";
  const part = (q, what) => (q ? `${what} at most ${quantity(q)}` : null);
  return [part(setting.maxImport, "Import"), part(setting.maxExport, "Export")].filter(Boolean).join(", ");
}

const LOOP_MODES = {
  off: "off (no grid meter, or turned off: limits only clamp what the agent commands)",
  free: "within the limits",
  holdingExport: "holding the export limit",
  holdingImport: "holding the import limit",
  meterLost: "grid meter lost: safe state (production within max export as if there were no load, no storage discharge)",
};

/** The grid loop's mode and the limits in force with where they come from. */
function gridLoopText(g) {
  const limit = (l) => (l ? `${quantity(l)} (${l.source === "config" ? "configured" : l.source})` : "none");
  return `Grid loop: ${LOOP_MODES[g.mode] || g.mode}. Max import ${limit(g.maxImport)}, max export ${limit(g.maxExport)}.`;
}

const CSIP_STATES = {
  discovering: "finding its registration",
  following: "following the utility's programs",
  unreachable: "cannot reach the server: the schedule as last received holds",
  pinRefused: "stopped: the server registered this device with another PIN",
  noCertificate: "stopped: the certificate files cannot be used",
};

const SOURCE_KINDS = {
  maxImport: "Max import",
  maxExport: "Max export",
  maxGeneration: "Max generation",
  maxLoad: "Max load",
  storageTarget: "Storage target",
  connect: "Connected",
  energize: "Energized",
};

/** The utility server's limits in force (CSIP-AUS), in words. */
function csipSection(g, now) {
  const c = g.csip;
  const seen = c.lastContact ? `, last answer ${clock(c.lastContact, now)}` : "";
  const items = (g.sources || []).map((l) => {
    const value = typeof l.value === "boolean" ? (l.value ? "yes" : "no") : quantity(l.value);
    const origin = l.until ? `control ${l.reference}, until ${clock(l.until, now)}` : `default ${l.reference || ""}`.trim();
    return h("li", {}, `${SOURCE_KINDS[l.kind] || l.kind} ${value} (${origin}${l.failsafe ? ", as last received" : ""})`);
  });
  return h(
    "div",
    { class: `csip csip-${c.state}` },
    h("p", {}, `Utility server (CSIP-AUS): ${CSIP_STATES[c.state] || c.state}${seen}. ${c.error ? `Last error: ${c.error}` : ""}`),
    items.length ? h("ul", { class: "csip-limits" }, items) : h("p", {}, "No limit from the utility now."),
  );
}

function toWatts(q) {
  const f = { W: 1, kW: 1e3, MW: 1e6 }[q.unit];
  return f ? q.value * f : q.value;
}

function settingText(component, entry) {
  if (component === "ess") return essText(entry.setting) + (entry.untilSocReached ? " (target reached: idle)" : "");
  if (component === "curtailment") return curtailmentText(entry.setting);
  if (component === "gridLimit") return gridLimitText(entry.setting);
  return mgiText(entry.value);
}

function fallbackText(component, site) {
  if (component === "ess") {
    return site && site.essFallback === "idle" ? "Idle (fallback)" : "Auto (fallback: the batteries run their own logic)";
  }
  if (component === "curtailment") return "No limit (fallback)";
  if (component === "gridLimit") return "The configured limits (fallback)";
  return "Off (fallback)";
}

/** An element whose text counts down to `until` (refreshed by `tickCountdowns`). */
function countdown(until, now) {
  return h("span", { class: "countdown", "data-until": until }, remaining(until, now));
}

function remaining(until, now) {
  return until > now ? `ends in ${duration(until - now)}` : "ended";
}

/** Refreshes every countdown and "ago" under `root`. */
export function tickCountdowns(root, now) {
  for (const el of root.querySelectorAll("[data-until]")) {
    el.textContent = remaining(Number(el.dataset.until), now);
  }
}

/** A device setpoint in words: storage power with its direction, a production limit. */
function setpointText(component, setpoint) {
  if (!setpoint) return "released (device's own control)";
  if (component === "ess" && setpoint.unit === "W") {
    if (setpoint.value === 0) return "idle (0 W)";
    return `${setpoint.value > 0 ? "discharge" : "charge"} ${quantity({ value: Math.abs(setpoint.value), unit: "W" })}`;
  }
  if (component === "curtailment") return `at most ${quantity(setpoint)}`;
  return quantity(setpoint);
}

const DEVICE_STATES = {
  applied: "✓ applied",
  pending: "… pending",
  failed: "✗ failed",
  fallback: "↺ fallback",
};

/**
 * The steering state: components (value, validity, countdown), what is
 * scheduled, each device's setpoint and whether it confirmed, and limits that
 * changed a target. `onEnd(component)` ends one (null: none offered).
 */
export function renderState(container, st, ctx) {
  const { site, names, now, onEnd } = ctx;
  const name = (ref) => names.get(ref) || ref;
  const rows = COMPONENTS.map(([component, key, label]) => {
    const e = st[key];
    const cells = e
      ? [
          h("td", { "data-component": component, "data-label": "Setting" }, settingText(component, e)),
          h("td", { "data-label": "Valid" }, `${clock(e.validFrom, now)} → ${clock(e.validUntil, now)} `, h("br"), countdown(e.validUntil, now)),
          h("td", { class: "mono", "data-label": "Request" }, e.requestId || ""),
        ]
      : [h("td", { class: "muted", "data-component": component, "data-label": "Setting" }, fallbackText(component, site)), h("td", { class: "empty-cell" }, "–"), h("td", { class: "empty-cell" }, "")];
    const action = onEnd && e ? h("button", { type: "button", class: "small", onclick: () => onEnd(component, label) }, "End now") : "";
    return h("tr", {}, h("th", { scope: "row" }, label), cells, onEnd ? h("td", { class: e ? "" : "empty-cell" }, action) : null);
  });
  const parts = [
    h(
      "table",
      { class: "components" },
      h("caption", {}, "Active signal"),
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col" }, "Component"), h("th", { scope: "col" }, "Setting"), h("th", { scope: "col" }, "Valid"), h("th", { scope: "col" }, "Request"), onEnd ? h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Action")) : null),
      ),
      h("tbody", {}, rows),
    ),
  ];
  const scheduled = st.scheduled || [];
  if (scheduled.length) {
    parts.push(
      h("h3", {}, "Scheduled"),
      h(
        "ul",
        { class: "scheduled" },
        scheduled.map((e) => {
          const label = (COMPONENTS.find((c) => c[0] === e.component) || [0, 0, e.component])[2];
          return h("li", {}, `${label}: ${settingText(e.component, e)}, from ${clock(e.validFrom, now)} to ${clock(e.validUntil, now)}`);
        }),
      ),
    );
  }
  if (st.gridLoop) parts.push(h("p", { class: `grid-loop loop-${st.gridLoop.mode}` }, gridLoopText(st.gridLoop)));
  if (st.gridLoop && st.gridLoop.csip) parts.push(csipSection(st.gridLoop, now));
  const devices = st.devices || [];
  parts.push(
    h(
      "table",
      { class: "told" },
      h("caption", {}, "What each device was told"),
      h(
        "thead",
        {},
        h("tr", {}, ["Device", "Component", "Setpoint", "State", "Confirmed", "Written", "Error"].map((c) => h("th", { scope: "col" }, c))),
      ),
      h(
        "tbody",
        {},
        devices.length
          ? devices.map((d) =>
              h(
                "tr",
                { "data-ref": d.deviceReference, class: `st-${d.state}` },
                h("th", { scope: "row" }, name(d.deviceReference)),
                h("td", { "data-label": "Component" }, d.component || "–"),
                h("td", { "data-label": "Setpoint" }, setpointText(d.component, d.setpoint)),
                h("td", { class: "state", "data-label": "State" }, DEVICE_STATES[d.state] || d.state),
                h("td", { "data-label": "Confirmed" }, d.confirmed ? "✓ yes (read back)" : "✗ not yet"),
                h("td", { "data-label": "Written" }, d.writtenAt ? clock(d.writtenAt, now) : "–"),
                h("td", { class: d.error ? "error-text" : "empty-cell", "data-label": "Error" }, d.error || ""),
              ),
            )
          : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No steerable device on this site.")),
      ),
    ),
  );
  const limits = st.limits || [];
  if (limits.length) {
    parts.push(
      h("h3", {}, "Limits applied"),
      h(
        "ul",
        { class: "limits" },
        limits.map((l) => {
          const w = (q) => (q ? quantity(q) : "released");
          const who = (l.devices || []).map(name).join(", ");
          return h("li", {}, `${l.component}: requested ${w(l.requested)}, applied ${w(l.applied)}${who ? ` (${who})` : ""}: ${l.reason}`);
        }),
      ),
    );
  }
  if (st.evaluatedAt) parts.push(h("p", { class: "muted small" }, `Control loop last evaluated at ${clock(st.evaluatedAt, now)}.`));
  fill(container, parts);
}

const UNIT_FACTORS = { min: 60_000, h: 3_600_000 };

/**
 * Reads the steering form into the exact request body, or throws an Error
 * naming the field. validUntil is on the agent's clock.
 */
export function readForm(form, now) {
  const f = form.elements;
  const body = {};
  const number = (el, what) => {
    const v = Number(el.value);
    if (el.value.trim() === "" || !Number.isFinite(v) || v < 0) {
      el.focus();
      throw new Error(`${what}: enter a number of at least 0`);
    }
    return v;
  };
  const ess = f["ess-mode"].value;
  if (ess === "power") {
    const v = number(f["ess-power"], "Storage power");
    const setting = { value: f["ess-dir"].value === "charge" ? -v : v, unit: f["ess-unit"].value };
    if (f["ess-until-soc"].value.trim() !== "") setting.untilSoc = number(f["ess-until-soc"], "Until SoC");
    body.energyStorageSetting = setting;
  } else if (ess === "idle") {
    body.energyStorageSetting = { mode: "idle" };
  }
  if (f["curt-on"].checked) {
    body.productionCurtailment = { value: number(f["curt-value"], "Curtailment"), unit: f["curt-unit"].value };
  }
  if (f["mgi"].checked) body.maximizeGridImport = true;
  if (f["grid-on"].checked) {
    const g = {};
    for (const [key, field, what] of [["maxImport", "grid-import", "Max import"], ["maxExport", "grid-export", "Max export"]]) {
      if (f[field].value.trim() !== "") g[key] = { value: number(f[field], what), unit: f["grid-unit"].value };
    }
    if (!Object.keys(g).length) {
      f["grid-import"].focus();
      throw new Error("Grid limits: give a max import, a max export or both.");
    }
    body.gridLimit = g;
  }
  if (!Object.keys(body).length) {
    throw new Error("Choose at least one component: a storage setting, a curtailment, maximize grid import or grid limits.");
  }
  const validity = number(f["validity"], "Valid for");
  const ms = validity * UNIT_FACTORS[f["validity-unit"].value];
  if (!(ms >= 1000)) throw new Error("Valid for: the signal must stay valid for at least a second.");
  body.validUntil = Math.round((now + ms) / 1000) * 1000;
  return body;
}

/** The request in words, one line per component, as it will act. */
export function describe(body, now) {
  const lines = [];
  lines.push(["Energy storage", body.energyStorageSetting ? essText(body.energyStorageSetting) : "unchanged"]);
  lines.push(["Production curtailment", body.productionCurtailment ? curtailmentText(body.productionCurtailment) : "unchanged"]);
  let mgi = "unchanged";
  if (body.maximizeGridImport) mgi = mgiText(true);
  else if (body.energyStorageSetting && body.productionCurtailment) {
    mgi = "Off for this validity (with both storage and curtailment, an absent value is set to false, rule 3)";
  }
  lines.push(["Maximize grid import", mgi]);
  lines.push(["Grid limits", body.gridLimit ? gridLimitText(body.gridLimit) : "unchanged"]);
  lines.push(["Valid", `now until ${clock(body.validUntil, now)} (${duration(body.validUntil - now)})`]);
  return lines;
}

/** The per-device setpoints a dry run predicts, as a table. */
export function allocationTable(allocation, names) {
  return h(
    "table",
    { class: "allocation" },
    h("caption", {}, "Device setpoints this would give now (dry run)"),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Device"), h("th", { scope: "col" }, "Component"), h("th", { scope: "col" }, "Setpoint"))),
    h(
      "tbody",
      {},
      (allocation || []).map((a) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, names.get(a.deviceReference) || a.deviceReference),
          h("td", {}, a.component || "–"),
          h("td", {}, setpointText(a.component, a.setpoint), a.fallback ? " (fallback)" : ""),
        ),
      ),
    ),
  );
}

export const dryRun = (siteRef, body) => post(withQuery(`/sites/${seg(siteRef)}/steering`, { dryRun: "true" }), body);
export const send = (siteRef, body) => post(`/sites/${seg(siteRef)}/steering`, body);
export const end = (siteRef, component) => del(withQuery(`/sites/${seg(siteRef)}/steering`, { component }));
