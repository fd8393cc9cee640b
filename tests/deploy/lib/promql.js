// Which series a PromQL expression selects, and whether they exist.
//
// selectors(expr) tokenizes PromQL just enough to find every vector
// selector: `name{label op "value", ...}` (or a bare name, or
// `{__name__="name"}`), skipping functions, aggregation operators,
// keywords, grouping label lists (`by (le)`, `on (job)`), ranges, numbers
// and strings. Syntax is not judged here: the tests run every expression
// through promtool for that. checkExpr() then reports selected names that
// Stagger does not export (lib/metrics.js) and label names / literal values
// outside each metric's fixed sets.
"use strict";

const { seriesNames, TARGET_LABELS } = require("./metrics");

const AGGREGATIONS = new Set([
  "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
  "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio",
]);
const GROUPING = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);
const KEYWORDS = new Set(["bool", "and", "or", "unless", "offset", "atan2", "inf", "nan", "start", "end"]);

function tokenize(expr) {
  const toks = [];
  let i = 0;
  const n = expr.length;
  const readString = () => {
    const q = expr[i++];
    let s = "";
    while (i < n && expr[i] !== q) {
      if (expr[i] === "\\" && q !== "`") {
        s += expr[i + 1];
        i += 2;
      } else {
        s += expr[i++];
      }
    }
    if (i >= n) throw new Error(`unterminated string in: ${expr}`);
    i++;
    return s;
  };
  while (i < n) {
    const c = expr[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === "#") { while (i < n && expr[i] !== "\n") i++; continue; }
    if (c === '"' || c === "'" || c === "`") { toks.push({ t: "str", v: readString() }); continue; }
    if (c === "{") {
      i++;
      const matchers = [];
      for (;;) {
        while (i < n && /[\s,]/.test(expr[i])) i++;
        if (i >= n) throw new Error(`unterminated {} in: ${expr}`);
        if (expr[i] === "}") { i++; break; }
        const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*/.exec(expr.slice(i));
        if (!m) throw new Error(`bad label matcher at "${expr.slice(i, i + 20)}" in: ${expr}`);
        i += m[0].length;
        if (!/["'`]/.test(expr[i] || "")) throw new Error(`label value must be a string in: ${expr}`);
        matchers.push({ label: m[1], op: m[2], value: readString() });
      }
      toks.push({ t: "matchers", v: matchers });
      continue;
    }
    if (c === "[") {
      const j = expr.indexOf("]", i);
      if (j < 0) throw new Error(`unterminated [] in: ${expr}`);
      toks.push({ t: "range", v: expr.slice(i + 1, j) });
      i = j + 1;
      continue;
    }
    let m = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(expr.slice(i));
    if (m) { toks.push({ t: "ident", v: m[0] }); i += m[0].length; continue; }
    m = /^(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?(?:[a-zA-Z]+[0-9]*)*)/.exec(expr.slice(i));
    if (m && m[0]) { toks.push({ t: "num", v: m[0] }); i += m[0].length; continue; }
    toks.push({ t: "punct", v: c });
    i++;
  }
  return toks;
}

// [{ name, matchers: [{label, op, value}] }]
function selectors(expr) {
  const toks = tokenize(expr);
  const out = [];
  for (let k = 0; k < toks.length; k++) {
    const tok = toks[k];
    const next = toks[k + 1];
    if (tok.t === "matchers") {
      // A selector with no name before it: `{__name__="x", ...}`.
      const prev = toks[k - 1];
      if (prev && prev.t === "ident" && prev.consumed) continue;
      const nameM = tok.v.find((m) => m.label === "__name__" && m.op === "=");
      out.push({ name: nameM ? nameM.value : null, matchers: tok.v.filter((m) => m.label !== "__name__") });
      continue;
    }
    if (tok.t !== "ident") continue;
    const lower = tok.v.toLowerCase();
    if (GROUPING.has(lower)) {
      if (next && next.t === "punct" && next.v === "(") {
        let depth = 0;
        for (k = k + 1; k < toks.length; k++) {
          if (toks[k].t === "punct" && toks[k].v === "(") depth++;
          if (toks[k].t === "punct" && toks[k].v === ")" && --depth === 0) break;
        }
      }
      continue;
    }
    if (KEYWORDS.has(lower) || AGGREGATIONS.has(tok.v)) continue;
    if (next && next.t === "punct" && next.v === "(") continue; // function call
    const sel = { name: tok.v, matchers: [] };
    if (next && next.t === "matchers") {
      sel.matchers = next.v;
      next.consumed = true;
      toks[k].consumed = true;
    }
    out.push(sel);
  }
  return out;
}

// Errors for names / labels / literal label values `expr` uses that Stagger
// does not export. `extra`: more known names (recording rules), whose labels
// are not checked.
function checkExpr(expr, extra = new Set()) {
  const known = seriesNames();
  const errors = [];
  let sels;
  try {
    sels = selectors(expr);
  } catch (e) {
    return [e.message];
  }
  if (sels.length === 0) errors.push(`selects no series: ${expr}`);
  for (const s of sels) {
    if (s.name === null) { errors.push(`selector without a metric name in: ${expr}`); continue; }
    if (extra.has(s.name)) continue;
    const labels = known.get(s.name);
    if (!labels) { errors.push(`unknown metric ${s.name} in: ${expr}`); continue; }
    for (const m of s.matchers) {
      if (TARGET_LABELS.includes(m.label)) continue;
      if (!(m.label in labels)) { errors.push(`${s.name} has no label ${m.label} in: ${expr}`); continue; }
      const allowed = labels[m.label];
      if (allowed === null) continue;
      // Literal values: `=` / `!=` a value, `=~` / `!~` a plain alternation.
      let values;
      if (m.op === "=" || m.op === "!=") values = [m.value];
      else if (/^[A-Za-z0-9_|]+$/.test(m.value)) values = m.value.split("|");
      else continue;
      for (const v of values) {
        const ok = allowed instanceof RegExp ? allowed.test(v) : allowed.includes(v);
        if (!ok) errors.push(`${s.name}{${m.label}} has no value "${v}" in: ${expr}`);
      }
    }
  }
  return errors;
}

module.exports = { tokenize, selectors, checkExpr };
