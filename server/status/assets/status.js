// staggerd's status page: polls the JSON endpoints of the same server
// (api/summary, api/endpoints, api/decisions, api/endpoint, api/pauses,
// api/disabled, api/events) with fetch() and redraws. The live events are
// polled by sequence number: each poll asks for the events after the last
// one seen. Text from the server only ever goes into the page through
// textContent and attributes, never as HTML, so endpoint keys show as
// stored. Nothing is loaded from anywhere else.
"use strict";

const REFRESH_MS = 2000;          // summary and endpoint rows
const CHART_MS = 1000;            // decisions chart and the selected endpoint
const MAX_SAMPLES = 600;          // the selected endpoint's chart: 10 minutes
const MAX_TRANSITIONS = 100;      // breaker transitions kept for it
const MAX_SINCE = 5000;           // "not clear since" times remembered
const MAX_EVENTS = 200;           // live events kept on the page
const VERDICTS = ["PROCEED", "DEFER", "GIVE_UP", "DONE"];
const BREAKER_LEVEL = { CLOSED: 0, HALF_OPEN: 1, OPEN: 2 };
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  errors: new Map(),          // source -> message, shown in the banner
  pageToken: "",              // the endpoints page shown
  nextToken: "",
  notClearSince: new Map(),   // key -> first time this page saw it listed
  selected: null,             // { key, samples: [], transitions: [] }
  events: [],                 // live events, newest first
  eventsAfter: 0,             // the last sequence number polled
  incarnation: null,          // the replica's, as the events API says
};

// The page's own query (?filter=all&page_size=20) is passed on to
// api/endpoints, so an operator can bookmark a view.
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
    throw new Error("cannot reach staggerd (" + e.message + ")");
  }
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const why = body && typeof body.error === "string" ? body.error : response.statusText;
    const err = new Error("HTTP " + response.status + ": " + why);
    err.status = response.status;
    throw err;
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
// under `source` and clear on the next success.
function poll(source, ms, fn) {
  const run = async () => {
    try {
      await fn();
      reportError(source, null);
    } catch (e) {
      reportError(source, e.message);
    }
    window.setTimeout(run, ms);
  };
  run();
}

// ---- times ---------------------------------------------------------------

function parseTime(s) {
  if (typeof s !== "string" || s === "") return null;
  // Protobuf writes up to 9 fractional digits; Date takes 3.
  const t = Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));
  return Number.isNaN(t) ? null : t;
}

function relative(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  const text = s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : Math.round(s / 3600) + "h";
  return ms >= 0 ? "in " + text : text + " ago";
}

function whenText(s) {
  const t = parseTime(s);
  if (t === null) return "–";
  return new Date(t).toISOString().replace(".000Z", "Z") + " (" + relative(t - Date.now()) + ")";
}

// ---- summary and replicas ------------------------------------------------

function renderSummary(s) {
  $("replica").textContent = s.replica ? "— " + s.replica : "";
  const rows = s.replicas.map((r) => {
    const tr = el("tr");
    tr.append(el("td", r.name || "(this replica)", "key"),
              el("td", r.health, "health-" + r.health),
              el("td", r.address || "–"),
              el("td", r.detail || ""),
              el("td", r.checked_at ? whenText(r.checked_at) : "–"));
    return tr;
  });
  $("replicas").replaceChildren(...rows);
  $("tracked").textContent = s.total_tracked;
  $("breakers").textContent = Object.entries(s.breakers)
      .map(([k, v]) => k + " " + v).join(", ");
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

// ---- endpoint rows ---------------------------------------------------------

function endpointsPath() {
  const q = new URLSearchParams();
  for (const name of ["filter", "page_size"]) {
    if (pageParams.has(name)) q.set(name, pageParams.get(name));
  }
  if (state.pageToken) q.set("page_token", state.pageToken);
  const query = q.toString();
  return "api/endpoints" + (query ? "?" + query : "");
}

function detailLink(key) {
  const a = el("a", key);
  a.href = "#endpoint=" + encodeURIComponent(key);
  return a;
}

function breakerText(e) {
  let text = e.breaker_state;
  if (e.breaker_state === "OPEN") text += ", half-opens " + whenText(e.open_until);
  const since = state.notClearSince.get(e.endpoint);
  if (e.breaker_state !== "CLOSED" && since) {
    text += "; listed since " + new Date(since).toLocaleTimeString();
  }
  return text;
}

function pauseText(p) {
  if (!p) return "–";
  let text = "until " + whenText(p.until) + " by " + (p.paused_by || "?") + ": " + p.reason;
  if (p.prefix) text += " (prefix " + p.prefix + ")";
  return text;
}

function triggerText(t) {
  return String(t || "").replace(/^DISABLE_TRIGGER_/, "");
}

function disabledText(d) {
  if (!d) return "–";
  return triggerText(d.trigger) + " since " + whenText(d.since) + ": " + d.reason;
}

function paceText(p) {
  if (!p) return "–";
  return p.phase + ", " + p.learned_from + ", " + Number(p.per_second).toFixed(1) + "/s" +
      (p.capped ? " (capped)" : "") + (p.releasing ? ", releasing" : "");
}

function endpointRow(e) {
  const tr = el("tr");
  const key = el("td", null, "key");
  key.append(detailLink(e.endpoint));
  tr.append(key,
            el("td", breakerText(e), "state-" + e.breaker_state),
            el("td", e.retry_after_until ? whenText(e.retry_after_until) : "–"),
            el("td", pauseText(e.pause)),
            el("td", disabledText(e.disabled), e.disabled ? "state-DISABLED" : ""),
            el("td", paceText(e.release_pace)),
            el("td", Number(e.budget_remaining).toFixed(1)),
            el("td", whenText(e.last_seen)));
  return tr;
}

function rememberSince(endpoints) {
  const now = Date.now();
  for (const e of endpoints) {
    if (!state.notClearSince.has(e.endpoint) && state.notClearSince.size < MAX_SINCE) {
      state.notClearSince.set(e.endpoint, now);
    }
  }
}

function renderEndpoints(page) {
  rememberSince(page.endpoints);
  $("endpoints").replaceChildren(...page.endpoints.map(endpointRow));
  state.nextToken = page.next_page_token || "";
  $("next-page").disabled = state.nextToken === "";
  $("first-page").disabled = state.pageToken === "";
  $("endpoints-info").textContent =
      "Showing " + page.endpoints.length + " (" + page.filter + ", page size " +
      page.page_size + "); " + page.left_out + " more on later pages; scanned " +
      page.scanned + " of " + page.total_tracked + " tracked.";
}

// ---- pauses, disabled endpoints, live events ----------------------------

function targetText(t) {
  if (!t) return "–";
  return t.prefix !== undefined ? t.prefix + "*" : t.endpoint;
}

function renderPauses(r) {
  const rows = r.pauses.map((p) => {
    const tr = el("tr");
    const prefix = p.target && p.target.prefix !== undefined;
    tr.append(el("td", targetText(p.target), "key"),
              el("td", prefix ? "prefix" : "endpoint"),
              el("td", whenText(p.until)),
              el("td", p.reason),
              el("td", p.paused_by || "–"),
              el("td", p.pause_id || "–"));
    return tr;
  });
  $("pauses").replaceChildren(...rows);
  $("pauses-info").textContent = r.pauses.length + " in force.";
}

function renderDisabled(r) {
  const rows = r.endpoints.map((d) => {
    const tr = el("tr");
    const key = el("td", null, "key");
    key.append(detailLink(d.endpoint));
    tr.append(key,
              el("td", triggerText(d.disabled.trigger), "state-DISABLED"),
              el("td", whenText(d.disabled.since)),
              el("td", d.disabled.reason),
              el("td", d.disabled.disabled_by || "–"));
    return tr;
  });
  $("disabled").replaceChildren(...rows);
  $("disabled-info").textContent = r.endpoints.length + " disabled.";
}

function eventDetails(e) {
  const parts = [];
  const kind = e.kind.replace(/^EVENT_/, "");
  if (kind === "BREAKER_OPENED") {
    parts.push(e.open_cause.replace(/^OPEN_CAUSE_/, ""),
               "half-opens " + whenText(e.open_until));
  }
  if (kind === "RETRY_AFTER_SET") parts.push("until " + whenText(e.retry_after_until));
  if (kind.startsWith("RELEASE_")) parts.push(Number(e.release_pace).toFixed(1) + "/s");
  if (e.pause) {
    if (kind === "PAUSED") parts.push("until " + whenText(e.pause.until));
    parts.push(e.pause.reason);
  }
  if (e.disabled) parts.push(triggerText(e.disabled.trigger), e.disabled.reason);
  if (e.by) parts.push("by " + e.by);
  if (e.ran_out) parts.push("ran out");
  if (e.forgotten) parts.push("state forgotten");
  return parts.join("; ");
}

function eventRow(e) {
  const tr = el("tr");
  tr.dataset.sequence = String(e.sequence);
  const kind = e.kind.replace(/^EVENT_/, "");
  tr.append(el("td", e.sequence),
            el("td", whenText(e.at)),
            el("td", kind, "event-" + kind),
            el("td", e.endpoint || targetText(e.pause && e.pause.target), "key"),
            el("td", eventDetails(e)));
  return tr;
}

async function pollEvents() {
  const q = new URLSearchParams({ after: String(state.eventsAfter), limit: "200" });
  if (state.incarnation !== null) q.set("incarnation", state.incarnation);
  const r = await getJson("api/events?" + q.toString());
  if (r.restarted) state.events = [];  // a new incarnation: a new log
  state.incarnation = r.incarnation;
  state.eventsAfter = r.next;
  for (const e of r.events) state.events.unshift(e);
  state.events.length = Math.min(state.events.length, MAX_EVENTS);
  $("events").replaceChildren(...state.events.map(eventRow));
  let info = "Replica " + r.replica + ", events " + r.oldest + ".." + r.next + " held.";
  if (r.missed_to > 0) info += " Missed " + r.missed_from + ".." + r.missed_to + " (no longer held).";
  if (r.restarted) info += " The replica restarted: its earlier events are gone.";
  $("events-info").textContent = info;
}

// ---- charts ----------------------------------------------------------------

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

// ---- the selected endpoint --------------------------------------------------

function renderFields(s) {
  const dl = $("detail-fields");
  const rows = [];
  const add = (name, value) => rows.push(el("dt", name), el("dd", value));
  const walk = (prefix, obj) => {
    for (const [k, v] of Object.entries(obj)) {
      if (v !== null && typeof v === "object") walk(prefix + k + ".", v);
      else add(prefix + k, String(v));
    }
  };
  walk("", s);
  dl.replaceChildren(...rows);
}

function renderEndpointChart(sel) {
  const svg = $("endpoint-chart");
  const paces = sel.samples.map((s) => s.pace);
  const max = Math.max(1, ...paces);
  chartFrame(svg, max.toFixed(1), "selected " + sel.samples.length + "s ago", "now");
  // The breaker drawn on the same scale: CLOSED 0, HALF_OPEN half, OPEN top.
  svg.append(series(sel.samples.map((s) => (BREAKER_LEVEL[s.breaker] || 0) * max / 2),
                    max, "series-breaker"));
  svg.append(series(paces, max, "series-pace"));
  svg.dataset.samples = String(sel.samples.length);
}

function addSample(sel, s) {
  const last = sel.samples[sel.samples.length - 1];
  if (last && last.breaker !== s.breaker_state) {
    sel.transitions.push({ at: Date.now(), from: last.breaker, to: s.breaker_state });
    if (sel.transitions.length > MAX_TRANSITIONS) sel.transitions.shift();
  }
  sel.samples.push({ pace: s.release_pace ? Number(s.release_pace.per_second) : 0,
                     breaker: s.breaker_state });
  if (sel.samples.length > MAX_SAMPLES) sel.samples.shift();
}

async function refreshSelected() {
  const sel = state.selected;
  if (!sel) return;
  let got;
  try {
    got = await getJson("api/endpoint?key=" + encodeURIComponent(sel.key));
  } catch (e) {
    if (state.selected !== sel) return;
    // An endpoint that is not tracked (404) is an answer, not an outage.
    $("detail-error").textContent = e.message;
    $("detail-error").hidden = false;
    if (e.status === 404 || e.status === 400) return;
    throw e;
  }
  if (state.selected !== sel) return;
  $("detail-error").hidden = true;
  renderFields(got.state);
  addSample(sel, got.state);
  renderEndpointChart(sel);
  $("transitions").replaceChildren(...sel.transitions.map((t) =>
      el("li", new Date(t.at).toLocaleTimeString() + ": " + t.from + " → " + t.to)));
}

function select(key) {
  if (!key) return;
  state.selected = { key, samples: [], transitions: [] };
  $("search-key").value = key;
  $("detail-key").textContent = key;
  $("detail-fields").replaceChildren();
  $("transitions").replaceChildren();
  $("detail").hidden = false;
  refreshSelected().catch((e) => reportError("endpoint", e.message));
}

function keyFromHash() {
  const m = /^#endpoint=(.*)$/.exec(window.location.hash);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (e) { return null; }
}

// ---- wiring -----------------------------------------------------------------

function start() {
  $("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("search-key").value;
    if (window.location.hash === "#endpoint=" + encodeURIComponent(key)) select(key);
    else window.location.hash = "endpoint=" + encodeURIComponent(key);
  });
  window.addEventListener("hashchange", () => select(keyFromHash()));
  $("next-page").addEventListener("click", () => { state.pageToken = state.nextToken; });
  $("first-page").addEventListener("click", () => { state.pageToken = ""; });
  poll("summary", REFRESH_MS, async () => renderSummary(await getJson("api/summary")));
  poll("endpoints", REFRESH_MS, async () => renderEndpoints(await getJson(endpointsPath())));
  poll("decisions", CHART_MS, async () => renderDecisions(await getJson("api/decisions")));
  poll("endpoint", CHART_MS, refreshSelected);
  poll("pauses", REFRESH_MS, async () => renderPauses(await getJson("api/pauses")));
  poll("disabled", REFRESH_MS, async () => renderDisabled(await getJson("api/disabled")));
  poll("events", REFRESH_MS, pollEvents);
  select(keyFromHash());
}

start();
