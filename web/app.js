// The technician page: signs in (or not, with auth = "none"), finds the site
// and the token's scopes, then keeps the devices, the power flow, the steering
// state and the charts fresh. Everything goes through the agent's own API.

import { ApiProblem, get, serverNow, setToken, token, seg } from "./api.js";
import { h, fill, clock, ago, quantity } from "./format.js";
import { fetchDevices, renderDevices, renderFlow } from "./live.js";
import { RANGES, windowOf, fetchSeries, drawChart } from "./chart.js";
import { fetchEnergy, renderEnergy } from "./energy.js";
import { heldNote } from "./held.js";
import { siteSeries, drawSiteChart, steeringMarks } from "./sitechart.js";
import * as steering from "./steering.js";

const LIVE_MS = 3000;
const CHART_MS = 60_000;
const HELD_MS = 20_000; // how far back the history reaches: /metrics is large at 1,000 devices
const HELD_SOON_MS = 5_000; // ... and sooner while a resolution is still missing

const $ = (id) => document.getElementById(id);

const state = {
  sites: [],
  site: null, // the chosen site object, or null when the agent has no site endpoints
  siteRef: null,
  scope: null, // "steer" | "read" | "none"
  openAccess: false,
  devices: [],
  range: "24h",
  charts: null, // the last fetched series, redrawn on resize
  sim: null, // the demo's simulated clock: {time, speed, at}
  chartsLoading: false,
  generation: 0, // bumped on every (re)start; stale loops stop themselves
  timers: [],
};

// ---- status, alerts -------------------------------------------------------

/**
 * The connection line. Only `text` is a live region, and it changes only when
 * the state does, so that screen readers are not told the time every 3 s.
 */
function setStatus(text, bad, time) {
  const el = $("conn-state");
  if (el.textContent !== text) el.textContent = text;
  $("conn").classList.toggle("bad", !!bad);
  $("conn-time").textContent = time || "";
}

function showAlert(text) {
  const el = $("alert");
  el.hidden = !text;
  el.textContent = text || "";
}

function problemText(e) {
  if (e instanceof ApiProblem) return e.code && e.status ? `${e.detail} (${e.status} ${e.code})` : e.detail;
  return String((e && e.message) || e);
}

// ---- hash parameters (range, site): shareable and kept across reloads ----

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

function saveHash() {
  const p = new URLSearchParams();
  p.set("range", state.range);
  if (state.siteRef && state.sites.length > 1) p.set("site", state.siteRef);
  history.replaceState(null, "", `#${p}`);
}

// ---- sign in ----------------------------------------------------------------

function askToken(problem) {
  stopLoops();
  $("main").hidden = true;
  $("login").hidden = false;
  $("sign-out").hidden = !token();
  $("access").textContent = "";
  $("login-why").textContent = token()
    ? `The agent did not accept the stored token: ${problem.detail}`
    : `This agent needs an API token: ${problem.detail}`;
  setStatus("Signed out", true);
  $("token").focus();
}

function wireLogin() {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    setToken(value);
    $("token").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => {
    setToken("");
    start();
  });
}

// ---- loops ----------------------------------------------------------------

function stopLoops() {
  state.generation += 1;
  for (const t of state.timers) clearTimeout(t);
  state.timers = [];
}

/**
 * Runs `fn` now and then `ms` after each run ends (or the delay it returns,
 * if it returns one), until the next (re)start.
 */
function loop(fn, ms) {
  const gen = state.generation;
  const run = async () => {
    if (gen !== state.generation) return;
    const next = document.hidden ? undefined : await fn(gen);
    const wait = typeof next === "number" ? next : ms;
    if (gen === state.generation) state.timers.push(setTimeout(run, wait));
  };
  run();
}

/** A failure of a loop: a 401 means the token is gone (reload, SIGHUP). */
function failed(e, where) {
  if (e instanceof ApiProblem && e.status === 401) {
    askToken(e);
    return;
  }
  setStatus(`${where} failed: ${problemText(e)}. Retrying…`, true);
}

async function start() {
  stopLoops();
  const gen = state.generation;
  showAlert("");
  setStatus("Connecting…");
  let probe;
  try {
    probe = await get("/devices");
  } catch (e) {
    if (gen !== state.generation) return;
    // 403: a token without the read scope; the page needs another token.
    if (e instanceof ApiProblem && (e.status === 401 || e.status === 403)) return askToken(e);
    setStatus("Cannot reach the agent", true);
    showAlert(`GET /devices: ${problemText(e)}. Trying again in 5 s.`);
    state.timers.push(setTimeout(start, 5000));
    return;
  }
  if (gen !== state.generation) return;
  state.openAccess = !token();
  $("login").hidden = true;
  $("main").hidden = false;
  $("sign-out").hidden = !token();

  try {
    await loadSites(probe);
    if (gen !== state.generation) return;
    await findScope();
  } catch (e) {
    if (gen !== state.generation) return;
    if (e instanceof ApiProblem && e.status === 401) return askToken(e);
    setStatus("Cannot reach the agent", true);
    showAlert(`${problemText(e)}. Trying again in 5 s.`);
    state.timers.push(setTimeout(start, 5000));
    return;
  }
  if (gen !== state.generation) return;

  loop(refreshLive, LIVE_MS);
  loop(refreshHealth, LIVE_MS);
  loop(refreshCharts, CHART_MS);
  loop(refreshHeld, HELD_MS);
  loop(async () => tick(), 1000);
}

async function loadSites(devices) {
  const note = $("steer-note");
  try {
    state.sites = await get("/sites");
  } catch (e) {
    if (e instanceof ApiProblem && e.status === 401) throw e;
    // An agent without site endpoints: show every device, no steering.
    state.sites = [];
    note.textContent = `Steering is not available on this agent (GET /sites: ${problemText(e)}).`;
  }
  const wanted = hashParams().get("site");
  state.site = state.sites.find((x) => x.siteReference === wanted) || state.sites[0] || null;
  state.siteRef = state.site ? state.site.siteReference : null;
  if (!state.site && state.sites.length === 0 && devices.length && !note.textContent) {
    note.textContent = "No site is configured.";
  }
  const sel = $("site-select");
  $("site-select-label").hidden = state.sites.length < 2;
  fill(
    sel,
    state.sites.map((x) => h("option", { value: x.siteReference, selected: x === state.site }, x.name)),
  );
  renderSiteFacts(state.site);
  const sim = state.site && state.site.simulation;
  state.sim = sim ? { time: sim.time, speed: sim.speed, at: Date.now() } : null;
  renderSimTime();
  const title = state.site ? state.site.name : "sitegate";
  $("site-name").textContent = title;
  document.title = `${title} · sitegate`;
}

/** The site's limits and rules from GET /sites, under the flow. */
function renderSiteFacts(site) {
  const el = $("site-facts");
  el.hidden = !site;
  if (!site) return;
  const grid = site.gridConnection || {};
  const limit = (q) => (q ? quantity(q) : "no limit set");
  const facts = [
    ["Site", `${site.name} (${site.siteReference})`],
    ["Grid connection", `import ≤ ${limit(grid.maxImport)}, export ≤ ${limit(grid.maxExport)}`],
    ["Rated production", quantity(site.ratedProductionPower)],
  ];
  if (site.fulfilment) {
    facts.push(["Fulfilment", `storage ${site.fulfilment.ess}, curtailment ${site.fulfilment.curtailment}`]);
  }
  if (site.essFallback) facts.push(["Storage fallback", site.essFallback]);
  fill(el, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

async function findScope() {
  const note = $("steer-note");
  if (!state.siteRef) {
    state.scope = "none";
  } else {
    const r = await steering.probeScope(state.siteRef);
    state.scope = r.scope;
    if (r.scope === "read") note.textContent = "This token may read but not steer (it lacks the steer scope).";
    else if (r.scope === "none") note.textContent = `Steering is not available: ${problemText(r.problem)}`;
    else note.textContent = "";
  }
  const access = state.openAccess
    ? "Open access (the agent runs without tokens)"
    : state.scope === "steer"
      ? "Token: read + steer"
      : "Token: read only";
  $("access").textContent = access;
  $("steer-form").hidden = state.scope !== "steer";
}

/**
 * How far back the store's history reaches, under the charts; read again
 * within seconds while a resolution is missing, so that a new store's
 * minute and hour means show soon after its first compaction.
 */
async function refreshHeld(gen) {
  const { note, missing } = await heldNote(clock);
  if (gen !== state.generation) return;
  const el = $("history-held");
  el.hidden = !note;
  el.textContent = note;
  return missing ? HELD_SOON_MS : HELD_MS;
}

/**
 * The agent's own health from GET /readyz (no token needed), shown only while
 * it is not plainly ready: a clock that is not synchronised, a store that
 * fails or runs elsewhere, steering changes not yet written, devices not
 * polled yet.
 */
async function refreshHealth(gen) {
  let lines = [];
  try {
    const r = await get("/readyz");
    if (r && r.status === "degraded" && Array.isArray(r.degraded)) lines = r.degraded;
  } catch (e) {
    lines = [e instanceof ApiProblem ? e.detail : `GET /readyz: ${problemText(e)}`];
  }
  if (gen !== state.generation) return;
  const el = $("health");
  el.hidden = lines.length === 0;
  fill(el, h("strong", {}, "Agent health"), h("ul", {}, ...lines.map((l) => h("li", {}, l))));
}

async function refreshLive(gen) {
  try {
    const devices = await fetchDevices(state.siteRef);
    if (gen !== state.generation) return;
    state.devices = devices;
    const now = serverNow();
    renderDevices($("device-list"), devices, now);
    renderFlow($("flow-body"), devices);
    setStatus("Live", false, `· updated ${clock(now)}`);
    if (!state.charts && !state.chartsLoading && devices.length) refreshCharts(gen);
  } catch (e) {
    if (gen === state.generation) failed(e, "Refreshing devices");
    return;
  }
  await refreshEvents(gen);
  if (state.siteRef && state.scope !== "none") {
    try {
      const st = await steering.fetchState(state.siteRef);
      if (gen !== state.generation) return;
      state.steerState = st;
      renderSteering(st);
    } catch (e) {
      if (gen !== state.generation) return;
      if (e instanceof ApiProblem && e.status === 401) return askToken(e);
      fill($("steer-state"), h("p", { class: "error-text" }, `GET /sites/${state.siteRef}/steering: ${problemText(e)}`));
    }
  }
}

/** The event list (GET /events): time, what it concerns, kind, detail. */
async function refreshEvents(gen) {
  let events;
  try {
    events = await get("/events?limit=50");
  } catch (e) {
    if (gen === state.generation) fill($("event-list"), h("li", { class: "error-text" }, `GET /events: ${problemText(e)}`));
    return;
  }
  if (gen !== state.generation) return;
  const names = new Map(state.devices.map((d) => [d.deviceReference, d.name]));
  const now = serverNow();
  const items = events.map((e) => {
    const about = e.deviceReference ? names.get(e.deviceReference) || e.deviceReference : e.siteReference || "agent";
    return h(
      "li",
      { "data-kind": e.kind },
      h("time", { datetime: new Date(e.timestamp).toISOString() }, clock(e.timestamp, now)),
      " ",
      h("strong", {}, about),
      ` ${e.kind}: ${e.detail}`,
    );
  });
  fill($("event-list"), ...(items.length ? items : [h("li", { class: "muted" }, "No events since the agent started.")]));
}

function names() {
  return new Map(state.devices.map((d) => [d.deviceReference, d.name]));
}

function renderSteering(st) {
  steering.renderState($("steer-state"), st, {
    site: state.site,
    names: names(),
    now: serverNow(),
    onEnd: state.scope === "steer" ? confirmEnd : null,
  });
}

/**
 * The demo's simulated time (GET /sites' `simulation`), which its sun and
 * load follow: the wall clock alone would contradict a midday sun. Carried
 * forward from the answer at its speed; UTC, as the simulated sun's day is.
 */
function renderSimTime() {
  const el = $("sim-time");
  el.hidden = !state.sim;
  if (!state.sim) return;
  const t = state.sim.time + (Date.now() - state.sim.at) * state.sim.speed;
  const hhmm = new Date(t).toISOString().slice(11, 16);
  el.textContent = `Simulated ${hhmm} UTC, ${state.sim.speed}× real time`;
}

function tick() {
  renderSimTime();
  const now = serverNow();
  steering.tickCountdowns(document, now);
  for (const el of document.querySelectorAll("[data-since]")) {
    const since = Number(el.dataset.since);
    if (since) el.textContent = ago(since, now);
  }
}

// ---- charts ---------------------------------------------------------------

function wireRange() {
  const fs = $("range");
  const wanted = hashParams().get("range");
  if (RANGES[wanted]) state.range = wanted;
  // A range asked for (in the link, or by a click) is kept; else the first
  // load fits the range to the data (fitRange).
  state.rangeFitted = Boolean(RANGES[wanted]);
  for (const [key, r] of Object.entries(RANGES)) {
    const input = h("input", { type: "radio", name: "range", value: key, id: `range-${key}`, checked: key === state.range });
    input.addEventListener("change", () => {
      state.range = key;
      state.rangeFitted = true;
      saveHash();
      state.charts = null;
      refreshCharts(state.generation);
    });
    fs.append(input, h("label", { for: `range-${key}` }, r.label));
  }
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(drawCharts, 150);
  });
}

let chartRequest = 0;

async function refreshCharts(gen) {
  const devices = state.devices;
  if (!devices.length) return;
  const mine = ++chartRequest;
  state.chartsLoading = true;
  const range = RANGES[state.range];
  const win = windowOf(range, serverNow());
  const offers = (d, p) => (d.properties || []).some((x) => x.property === p);
  const load = (list, property) =>
    Promise.all(
      list.map(async (d) => {
        try {
          return { name: d.name, points: await fetchSeries(d.deviceReference, property, range, win) };
        } catch (e) {
          if (e instanceof ApiProblem && e.status === 401) throw e;
          return { name: d.name, points: [], error: problemText(e) };
        }
      }),
    );
  const energy = state.siteRef
    ? fetchEnergy(state.siteRef, win).then((answer) => ({ answer }), (e) => ({ error: problemText(e) }))
    : Promise.resolve(null);
  try {
    const [powerSeries, socSeries] = await Promise.all([
      load(devices.filter((d) => offers(d, "activePower")), "activePower"),
      load(devices.filter((d) => d.type === "battery" && offers(d, "soc")), "soc"),
    ]);
    if (gen !== state.generation || mine !== chartRequest) return;
    if (fitRange(powerSeries)) return refreshCharts(gen);
    state.charts = { range, win, powerSeries, socSeries };
    const e = await energy;
    if (gen !== state.generation || mine !== chartRequest) return;
    $("energy").hidden = !e;
    if (e) renderEnergy($("energy-body"), e.answer, e.error);
    $("chart-note").textContent = `Last ${range.label}, one point per ${range.resolution.value} ${range.resolution.unit} (mean). Updated ${clock(serverNow())}.`;
    drawCharts();
  } catch (e) {
    if (gen === state.generation) failed(e, "Loading the history");
  } finally {
    if (mine === chartRequest) state.chartsLoading = false;
  }
}

/**
 * Once per page, unless a range was asked for: the shortest range that holds
 * all the history the first load found (a site an hour old gets 1 h, not a
 * sliver at the right edge of 24 h). True when it changed the range.
 */
function fitRange(series) {
  if (state.rangeFitted) return false;
  state.rangeFitted = true;
  const first = Math.min(...series.flatMap((x) => x.points.filter((p) => p[1] !== null).map((p) => p[0])));
  if (!Number.isFinite(first)) return false;
  const age = serverNow() - first;
  const key = Object.keys(RANGES).find((k) => RANGES[k].span >= age) || "7d";
  if (key === state.range) return false;
  state.range = key;
  const input = $(`range-${key}`);
  if (input) input.checked = true;
  return true;
}

/** A PowerValue in W (undefined when absent). */
function watts(q) {
  return q ? q.value * ({ W: 1, kW: 1e3, MW: 1e6 }[q.unit] || 1) : undefined;
}

function drawCharts() {
  const c = state.charts;
  if (!c) return;
  const common = { from: c.win.from, to: c.win.to, step: c.range.step };
  const grid = (state.site && state.site.gridConnection) || {};
  const limits = { maxImport: watts(grid.maxImport), maxExport: watts(grid.maxExport) };
  const marks = steeringMarks(state.steerState);
  drawSiteChart($("chart-site"), { ...common, points: siteSeries(state.devices, c.powerSeries), limits, marks });
  drawChart($("chart-power"), { ...common, label: "Active power per device", unit: "kW", scale: 1000, series: c.powerSeries });
  const soc = $("chart-soc");
  soc.hidden = !c.socSeries.length;
  if (c.socSeries.length) drawChart(soc, { ...common, label: "Battery state of charge", unit: "%", min: 0, max: 100, series: c.socSeries });
}

// ---- steering form and confirmation -------------------------------------

let confirmAction = null;

function openConfirm(title, content, action, sendLabel) {
  $("confirm-h").textContent = title;
  fill($("confirm-body"), content);
  $("confirm-error").hidden = true;
  $("confirm-send").textContent = sendLabel;
  $("confirm-send").disabled = false;
  confirmAction = action;
  const dlg = $("confirm");
  if (!dlg.open) dlg.showModal();
  $("confirm-cancel").focus();
}

function closeConfirm() {
  confirmAction = null;
  $("confirm").close();
}

function wireConfirm() {
  $("confirm-cancel").addEventListener("click", closeConfirm);
  $("confirm").addEventListener("close", () => {
    confirmAction = null;
  });
  $("confirm-send").addEventListener("click", async () => {
    if (!confirmAction) return;
    const btn = $("confirm-send");
    btn.disabled = true;
    try {
      const done = await confirmAction();
      closeConfirm();
      showSteerResult(done);
      refreshLive(state.generation);
    } catch (e) {
      btn.disabled = false;
      const el = $("confirm-error");
      el.hidden = false;
      el.textContent = `The agent refused: ${problemText(e)}`;
    }
  });
}

function showSteerResult(text) {
  const el = $("steer-form-msg");
  el.hidden = false;
  el.classList.remove("error-text");
  el.classList.add("ok-text");
  el.textContent = text;
}

function showFormError(text) {
  const el = $("steer-form-msg");
  el.hidden = !text;
  el.classList.add("error-text");
  el.classList.remove("ok-text");
  el.textContent = text || "";
}

function wireSteerForm() {
  const form = $("steer-form");
  const syncDisabled = () => {
    const f = form.elements;
    const power = f["ess-mode"].value === "power";
    for (const name of ["ess-dir", "ess-power", "ess-unit", "ess-until-soc"]) {
      const el = f[name];
      for (const x of el instanceof RadioNodeList ? el : [el]) x.disabled = !power;
    }
    f["curt-value"].disabled = !f["curt-on"].checked;
    f["curt-unit"].disabled = !f["curt-on"].checked;
  };
  form.addEventListener("change", syncDisabled);
  syncDisabled();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showFormError("");
    const now = serverNow();
    let body;
    try {
      body = steering.readForm(form, now);
    } catch (e) {
      showFormError(e.message);
      return;
    }
    const site = state.siteRef;
    const path = `/sites/${seg(site)}/steering`;
    const content = [
      h("dl", { class: "summary" }, steering.describe(body, now).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("p", {}, "Exactly this request will be sent:"),
      h("pre", { class: "request", id: "confirm-request" }, `POST ${path}\n${JSON.stringify(body, null, 2)}`),
    ];
    try {
      const dry = await steering.dryRun(site, body);
      content.push(steering.allocationTable(dry.allocation, names()));
    } catch (e) {
      if (e instanceof ApiProblem && e.status === 401) return askToken(e);
      // The agent would refuse it: say why instead of offering to send it.
      showFormError(`The agent would refuse this signal: ${problemText(e)}`);
      return;
    }
    openConfirm(
      "Send this steering signal?",
      content,
      async () => {
        const r = await steering.send(site, body);
        return `Sent at ${clock(serverNow())}: request ${r && r.requestId ? r.requestId : ""}.`;
      },
      "Send signal",
    );
  });
}

function confirmEnd(component, label) {
  const path = `/sites/${state.siteRef}/steering?component=${component}`;
  openConfirm(
    `End ${label.toLowerCase()} now?`,
    [
      h("p", {}, `${label} returns to its fallback at once.`),
      h("pre", { class: "request" }, `DELETE ${path}`),
    ],
    async () => {
      await steering.end(state.siteRef, component);
      return `${label} ended at ${clock(serverNow())}.`;
    },
    "End now",
  );
}

// ---- boot -----------------------------------------------------------------

function boot() {
  wireLogin();
  wireRange();
  wireConfirm();
  wireSteerForm();
  $("site-select").addEventListener("change", (ev) => {
    const wanted = ev.target.value;
    const p = hashParams();
    p.set("site", wanted);
    history.replaceState(null, "", `#${p}`);
    state.charts = null;
    start();
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !$("main").hidden) refreshLive(state.generation);
  });
  start();
}

boot();
