// How far back the store's history reaches, per resolution (raw samples,
// minute and hour means), from the agent's own /metrics
// (`sitegate_store_oldest_timestamp_seconds`): a size cap or the retention
// may have deleted older data, and a chart that starts later says why.

import { ApiProblem, getText } from "./api.js";

const SERIES = "sitegate_store_oldest_timestamp_seconds";
const NAMES = [
  ["raw", "raw samples"],
  ["minute", "minute means"],
  ["hour", "hourly means"],
];

/** The oldest time (ms) of each resolution in a Prometheus text answer. */
export function oldestHeld(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${SERIES}{`)) continue;
    const m = line.match(/resolution="(\w+)"\}\s+([0-9.eE+-]+)/);
    if (m) out[m[1]] = Number(m[2]) * 1000;
  }
  return out;
}

/**
 * `{ note, missing }`: the note "History held: raw samples from …, minute
 * means from …" ("" when the agent does not say: metrics turned off, or
 * nothing stored yet), and whether the agent answered but without every
 * resolution (a new store has minute and hour means only after its first
 * compaction). With metrics turned off nothing is missing: nothing will come.
 */
export async function heldNote(clock) {
  let text;
  try {
    text = await getText("/metrics");
  } catch (e) {
    if (e instanceof ApiProblem && e.status === 401) throw e;
    return { note: "", missing: false };
  }
  const oldest = oldestHeld(text);
  const parts = NAMES.filter(([k]) => Number.isFinite(oldest[k])).map(
    ([k, name]) => `${name} from ${clock(oldest[k])}`,
  );
  return {
    note: parts.length ? `History held: ${parts.join(", ")}.` : "",
    missing: parts.length < NAMES.length,
  };
}
