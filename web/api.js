// The agent's HTTP API as the page uses it: the token, requests, problem+json
// errors and an estimate of the agent's clock. No DOM here.

const TOKEN_KEY = "sitegate.token";

/** An error answer of the API (RFC 9457 problem), or a network failure (status 0). */
export class ApiProblem extends Error {
  constructor(status, code, detail, field) {
    super(detail);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.field = field;
  }
}

/** The token the technician entered, kept for this browser tab only. */
export function token() {
  if (memoryToken !== null) return memoryToken;
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage disabled: the token lives as long as this page does.
  }
  memoryToken = value;
}

/** The token as last set on this page (null: read sessionStorage). */
let memoryToken = null;


// The agent's clock, estimated from the Date headers (whole seconds) of its
// answers: each answer bounds the offset between the agent's clock and ours,
// and the bounds of all answers are intersected. Validity countdowns and the
// validUntil of a steering request are computed on the agent's clock, so a
// laptop whose clock is off still sends what the technician meant.
let offsetLo = -Infinity;
let offsetHi = Infinity;

function learnClock(sentAt, receivedAt, dateHeader) {
  const server = Date.parse(dateHeader || "");
  if (Number.isNaN(server)) return;
  const lo = server - receivedAt;
  const hi = server + 1000 - sentAt;
  const newLo = Math.max(offsetLo, lo);
  const newHi = Math.min(offsetHi, hi);
  if (newLo > newHi) {
    // One of the clocks jumped: start again from this answer.
    offsetLo = lo;
    offsetHi = hi;
  } else {
    offsetLo = newLo;
    offsetHi = newHi;
  }
}

/** Milliseconds since the epoch on the agent's clock (our clock until an answer came). */
export function serverNow() {
  if (!Number.isFinite(offsetLo) || !Number.isFinite(offsetHi)) return Date.now();
  return Math.round(Date.now() + (offsetLo + offsetHi) / 2);
}

/**
 * One call to the agent with the token, its `Date` learnt: the answer's
 * status and text. An unanswered call is an ApiProblem of status 0.
 */
async function send(method, path, accept, body) {
  const headers = { Accept: accept };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const sentAt = Date.now();
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiProblem(0, "network", `the agent did not answer ${method} ${path} (${e.message || e})`);
  }
  learnClock(sentAt, Date.now(), res.headers.get("Date"));
  return { res, text: await res.text() };
}

/**
 * Sends one request and returns the parsed JSON body. Throws an ApiProblem for
 * an error answer (with the problem's detail) or when the agent cannot be reached.
 */
export async function request(method, path, body) {
  const { res, text } = await send(method, path, "application/json", body);
  let json = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!res.ok) {
    const detail = (json && json.detail) || `${res.status} ${res.statusText || ""}`.trim();
    throw new ApiProblem(res.status, (json && json.code) || "", detail, json && json.field);
  }
  return json;
}

/** A GET whose answer is text (`/metrics`); a failure is an ApiProblem. */
export async function getText(path) {
  const { res, text } = await send("GET", path, "text/plain");
  if (!res.ok) throw new ApiProblem(res.status, "", `${res.status} ${res.statusText || ""}`.trim());
  return text;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
export const del = (path) => request("DELETE", path);

/** `path` with one query parameter per entry of `params` (undefined ones left out). */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export function seg(s) {
  return encodeURIComponent(s);
}
