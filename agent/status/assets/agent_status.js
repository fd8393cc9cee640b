// stagger-agent's status page: polls the JSON endpoints of the same server
// (api/agent, api/decisions) with fetch() and redraws. Text from the
// server only ever goes into the page through textContent and attributes,
// never as HTML, so endpoint keys show as stored. Nothing is loaded from
// anywhere else.
"use strict";

const REFRESH_MS = 2000;  // the agent, its replicas and leases
const CHART_MS = 1000;    // the decisions chart
const VERDICTS = ["PROCEED", "DEFER", "GIVE_UP", "DONE"];
const SOURCES = [["lease", "under a lease"], ["coordinator", "coordinator"],
                 ["fallback", "fallback"]];
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  errors: new Map(),  // source -> message, shown in the banner
  after: "",          // the leases page shown starts after this endpoint
  nextAfter: "",
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
  const t = Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));  // Date takes 3 digits
  return Number.isNaN(t) ? null : t;
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

function replicaRow(r) {
  const tr = el("tr");
  tr.dataset.replica = r.name;
  tr.append(cell(r.name, "key"), cell(r.target, "key"),
            cell(r.up ? "up" : "down", "state-" + (r.up ? "up" : "down")),
            cell(r.serving ? "SERVING" : "NOT_SERVING",
                 "state-" + (r.serving ? "SERVING" : "NOT_SERVING")),
            cell(r.stream, "stream state-" + r.stream),
            cell(r.incarnation === "0" ? "–" : r.incarnation, "key"),
            cell(r.leases_held, "num"), cell(r.flushes, "num"),
            cell(r.reconnects, "num"));
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

function leaseRow(l, now) {
  const tr = el("tr");
  tr.dataset.endpoint = l.endpoint;
  tr.append(cell(l.endpoint, "key"), cell(l.replica, "key"), cell(l.epoch, "num"),
            cell(whenText(l.expires, now)),
            cell(l.left + " of " + l.allowance, "num"));
  return tr;
}

function agentPath() {
  const q = new URLSearchParams();
  if (pageParams.has("page_size")) q.set("page_size", pageParams.get("page_size"));
  if (state.after !== "") q.set("after", state.after);
  const s = q.toString();
  return "api/agent" + (s ? "?" + s : "");
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
  $("decision-counts").replaceChildren(
      ...SOURCES.map(([s, label]) => countsRow(s, label, a.decisions[s])));
  $("leases").replaceChildren(...a.leases.map((l) => leaseRow(l, now)));
  const from = state.after === "" ? "" : " after " + JSON.stringify(state.after);
  $("leases-info").textContent =
      a.leases_matched + " live lease(s)" + from + "; " + a.leases.length +
      " shown (pages of " + a.page_size + ")" +
      (a.left_out > 0 ? ", " + a.left_out + " more on the next pages." : ".") +
      " " + a.flushes + " flushes and " + a.reconnects + " reconnects over all streams.";
  state.nextAfter = a.next_after;
  $("next-page").disabled = a.next_after === "";
  $("first-page").disabled = state.after === "";
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
  $("next-page").addEventListener("click", () => { state.after = state.nextAfter; });
  $("first-page").addEventListener("click", () => { state.after = ""; });
  poll("agent", REFRESH_MS, async () => renderAgent(await getJson(agentPath())));
  poll("decisions", CHART_MS, async () => renderDecisions(await getJson("api/decisions")));
}

start();
