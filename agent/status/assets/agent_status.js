// stagger-agent's status page: polls the JSON endpoints of the same server
// (api/agent, api/decisions) with fetch() and redraws. Text from the
// server only ever goes into the page through textContent and attributes,
// never as HTML, so endpoint keys, refusals and names show as stored.
// Nothing is loaded from anywhere else.
"use strict";

const REFRESH_MS = 2000;  // the agent, its replicas and not-clear entries
const CHART_MS = 1000;    // the decisions chart
const VERDICTS = ["PROCEED", "DEFER", "GIVE_UP", "DONE"];
const SOURCES = [["lease", "under a lease"], ["coordinator", "coordinator"],
                 ["fallback", "fallback"]];
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  errors: new Map(),  // source -> message, shown in the banner
  after: "",          // the entries' page shown starts after this target
  nextAfter: "",
  refreshAgent: null,  // polls api/agent now (set by start)
};

// Each replica's lease_state (agent_status_api.h, LeaseState): a short
// word for the cell, and what it means for this agent's answers.
const LEASE_STATES = {
  LIVE: ["live", "its keys outside the set are answered here"],
  OFF: ["off", "leases off: every call goes to the coordinator"],
  REFUSED: ["refused", ""],  // the replica's own words follow
  OUT_OF_DATE: ["copy out of date",
                "waiting for a snapshot of the set; its keys go to the coordinator"],
  STREAM_DOWN: ["none: stream down",
                "its keys go to the coordinator, or to the fallback"],
  NOT_GRANTED: ["not granted yet",
                "the coordinator's learning period after a start (one ttl, " +
                "at least its longest probe_timeout), or this copy lacks a " +
                "version the other leases hold"],
};

// The page's own query (?page_size=20) is passed on to api/agent, so an
// operator can bookmark a view.
const pageParams = new URLSearchParams(window.location.search);

function $(id) { return document.getElementById(id); }

function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// ---- fetching and the error banner -------------------------------------

async function getJson(path) {
  let response;
  try {
    response = await fetch(path, { cache: "no-store" });
  } catch (e) {
    throw new Error("cannot reach stagger-agent (" + e.message + ")");
  }
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const why = body && typeof body.error === "string" ? body.error : response.statusText;
    throw new Error("HTTP " + response.status + ": " + why);
  }
  if (body === null) throw new Error("not JSON: " + path);
  return body;
}

function reportError(source, message) {
  if (message === null) state.errors.delete(source);
  else state.errors.set(source, message);
  const banner = $("banner");
  banner.replaceChildren();
  for (const [src, msg] of state.errors) banner.append(el("div", src + ": " + msg));
  banner.hidden = state.errors.size === 0;
}

// Runs `fn` now and every `ms` after it finished; errors go to the banner
// under `source` and clear on the next success. Returns a function that
// runs `fn` at once (a page turned), outside the schedule.
function poll(source, ms, fn) {
  const once = async () => {
    try {
      await fn();
      reportError(source, null);
    } catch (e) {
      reportError(source, e.message);
    }
  };
  const run = async () => {
    await once();
    window.setTimeout(run, ms);
  };
  run();
  return once;
}

// ---- times ---------------------------------------------------------------

function parseTime(s) {
  if (typeof s !== "string" || s === "") return null;
  const t = Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));  // Date takes 3 digits
  return Number.isNaN(t) ? null : t;
}

// A lease's time left: "850 ms", "1.5 s", "42 s", "3 min".
function durationText(ms) {
  if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
  if (ms < 10000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 120000) return Math.round(ms / 1000) + " s";
  return Math.round(ms / 60000) + " min";
}

function relative(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  const text = s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : Math.round(s / 3600) + "h";
  return ms >= 0 ? "in " + text : text + " ago";
}

function whenText(s, now) {
  const t = parseTime(s);
  if (t === null) return "–";
  return new Date(t).toISOString().replace(".000Z", "Z") + " (" + relative(t - now) + ")";
}

// ---- the agent -------------------------------------------------------------

function cell(text, className) { return el("td", text, className); }

// The lease's cell: a word (and the time left), then why, muted.
function leaseCell(r) {
  const [word, meaning] = LEASE_STATES[r.lease_state] || [r.lease_state, ""];
  const td = cell(null, "lease state-" + r.lease_state);
  td.dataset.state = r.lease_state;
  let head = word;
  if (r.leased) head += ", " + durationText(r.lease_left_ms) + " left";
  td.append(el("span", head, "word"));
  const why = r.lease_state === "REFUSED" ? r.refusal : meaning;
  if (why) td.append(el("span", why, "why"));
  return td;
}

// The copy of the replica's set: its version and size, and whether it is
// current.
function setCell(r) {
  if (r.stream === "OFF") return cell("–", "set");
  const td = cell("v" + r.set_version + ", " + r.not_clear +
                  (r.not_clear === 1 ? " entry" : " entries"), "set");
  if (!r.in_sync) td.append(el("span", "out of date", "why state-out-of-date"));
  return td;
}

function replicaRow(r) {
  const tr = el("tr");
  tr.dataset.replica = r.name;
  tr.append(cell(r.name, "key"), cell(r.target, "key"),
            cell(r.up ? "up" : "down", "state-" + (r.up ? "up" : "down")),
            cell(r.serving ? "SERVING" : "NOT_SERVING",
                 "state-" + (r.serving ? "SERVING" : "NOT_SERVING")),
            cell(r.stream, "stream state-" + r.stream),
            cell(r.incarnation === "0" ? "–" : r.incarnation, "key"),
            leaseCell(r), setCell(r),
            cell(r.flushes, "num"), cell(r.reconnects, "num"));
  return tr;
}

function countsRow(source, label, counts) {
  const tr = el("tr");
  tr.dataset.source = source;
  tr.append(cell(label));
  let total = 0;
  for (const v of VERDICTS) {
    tr.append(cell(counts[v], "num"));
    total += counts[v];
  }
  tr.append(cell(total, "num total"));
  return tr;
}

function entryRow(e, now) {
  const tr = el("tr");
  tr.dataset.target = e.target;
  tr.dataset.replica = e.replica;
  tr.append(cell(e.target, "key"), cell(e.scope), cell(e.why, "why-" + e.why),
            cell(e.replica, "key"), cell(e.until === null ? "–" : whenText(e.until, now)));
  return tr;
}

// The row an empty table shows, so that "none" is said, not implied.
function emptyRow(text, columns) {
  const tr = el("tr", null, "empty");
  const td = cell(text, "muted");
  td.colSpan = columns;
  tr.append(td);
  return tr;
}

function agentPath() {
  const q = new URLSearchParams();
  if (pageParams.has("page_size")) q.set("page_size", pageParams.get("page_size"));
  if (state.after !== "") q.set("after", state.after);
  const s = q.toString();
  return "api/agent" + (s ? "?" + s : "");
}

function renderEntries(a, now) {
  const rows = a.not_clear.map((e) => entryRow(e, now));
  if (rows.length === 0) {
    rows.push(emptyRow(a.after === "" ? "None: every key is clear."
                                      : "None after this target.", 5));
  }
  $("not-clear").replaceChildren(...rows);
  const from = a.after === "" ? "" : " after " + JSON.stringify(a.after);
  $("not-clear-info").textContent =
      a.not_clear_matched + " entr" + (a.not_clear_matched === 1 ? "y" : "ies") +
      from + "; " + a.not_clear.length + " shown (pages of " + a.page_size + ")" +
      (a.left_out > 0 ? ", " + a.left_out + " more on the next pages." : ".");
  state.nextAfter = a.next_after;
  $("next-page").disabled = a.next_after === "";
  $("first-page").disabled = a.after === "";
}

function renderAgent(a) {
  const now = parseTime(a.now) ?? Date.now();
  $("agent-id").textContent = a.agent_id;
  $("coordinator").textContent = a.coordinator;
  $("fallback").textContent = a.fallback;
  $("leases-on").textContent = a.leases_on ? "on" : "off";
  $("coordinator-up").textContent = a.coordinator_up ? "yes" : "no";
  $("updated").textContent = "updated " + new Date(now).toISOString().replace(/\.\d+Z$/, "Z");
  $("replicas").replaceChildren(...a.replicas.map(replicaRow));
  $("streams-info").textContent =
      a.flushes + " flushes and " + a.reconnects + " reconnects over all streams; " +
      a.waiting_calls + " waiting call(s) held here, " + a.waiting_overflows +
      " answered at once for want of room.";
  $("decision-counts").replaceChildren(
      ...SOURCES.map(([s, label]) => countsRow(s, label, a.decisions[s])));
  // An answer to a page the operator has already left is not drawn.
  if (a.after === state.after) renderEntries(a, now);
}

// ---- the chart ---------------------------------------------------------------

const CHART = { w: 640, h: 180, left: 44, right: 8, top: 8, bottom: 20 };

function chartFrame(svg, maxValue, leftLabel, rightLabel) {
  const c = CHART;
  svg.replaceChildren(
      svgEl("line", { x1: c.left, y1: c.h - c.bottom, x2: c.w - c.right, y2: c.h - c.bottom, class: "axis" }),
      svgEl("line", { x1: c.left, y1: c.top, x2: c.left, y2: c.h - c.bottom, class: "axis" }));
  const label = (x, y, text, anchor) => {
    const t = svgEl("text", { x, y, "text-anchor": anchor });
    t.textContent = text;
    svg.append(t);
  };
  label(c.left - 4, c.top + 10, String(maxValue), "end");
  label(c.left - 4, c.h - c.bottom, "0", "end");
  label(c.left, c.h - 4, leftLabel, "start");
  label(c.w - c.right, c.h - 4, rightLabel, "end");
}

// A polyline of `values` (one per x step) scaled to `maxValue`.
function series(values, maxValue, className) {
  const c = CHART;
  const plotW = c.w - c.left - c.right;
  const plotH = c.h - c.top - c.bottom;
  const step = values.length > 1 ? plotW / (values.length - 1) : 0;
  const points = values.map((v, i) => {
    const x = c.left + i * step;
    const y = c.top + plotH - (maxValue > 0 ? (v / maxValue) * plotH : 0);
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  return svgEl("polyline", { points: points.join(" "), class: className });
}

function renderDecisions(d) {
  const svg = $("decisions-chart");
  let max = 1;
  for (const v of VERDICTS) for (const n of d.verdicts[v]) max = Math.max(max, n);
  chartFrame(svg, max, "−" + d.seconds / 60 + " min", "now");
  let points = 0;
  for (const v of VERDICTS) {
    svg.append(series(d.verdicts[v], max, "series-" + v));
    points += d.verdicts[v].length;
  }
  svg.dataset.lastSecond = String(d.last_second);
  svg.dataset.points = String(points);
  svg.dataset.total = String(VERDICTS.reduce(
      (sum, v) => sum + d.verdicts[v].reduce((a, b) => a + b, 0), 0));
  const legend = $("decisions-legend");
  if (legend.childElementCount === 0) {
    legend.append(...VERDICTS.map((v) => el("span", v, "key series-" + v)));
  }
}

// ---- wiring -----------------------------------------------------------------

function start() {
  const turnPage = (after) => {
    state.after = after;
    $("next-page").disabled = true;
    $("first-page").disabled = true;
    state.refreshAgent();
  };
  $("next-page").addEventListener("click", () => turnPage(state.nextAfter));
  $("first-page").addEventListener("click", () => turnPage(""));
  state.refreshAgent = poll("agent", REFRESH_MS,
                            async () => renderAgent(await getJson(agentPath())));
  poll("decisions", CHART_MS, async () => renderDecisions(await getJson("api/decisions")));
}

start();
