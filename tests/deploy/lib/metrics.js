// The metrics Stagger exports, with their labels and each label's fixed
// values, read from the metric catalog (core/metrics/metric_catalog.h):
// the JSON `stagger-metric-catalog --out FILE` writes, whose path ctest
// passes in STAGGER_METRIC_CATALOG (tests/deploy/CMakeLists.txt). The
// rules, their unit tests, the dashboard and their checks may reference
// only these (plus Prometheus' own `up`). A metric renamed in the catalog
// makes the deploy tests show every rule and panel that still uses the old
// name.
"use strict";

const fs = require("node:fs");

// Labels every scraped series can carry: Prometheus' target labels and the
// ones Kubernetes service discovery / the Prometheus Operator add.
const TARGET_LABELS = ["job", "instance", "namespace", "pod", "service", "container", "endpoint"];

// The catalog JSON as { name -> { type, exporter, labels: { label: values } } }.
// Throws, naming what is wrong, on a missing path or a malformed file.
function loadCatalog(file = process.env.STAGGER_METRIC_CATALOG) {
  if (!file) {
    throw new Error("STAGGER_METRIC_CATALOG is not set: run these checks through ctest, " +
      "or point it at the output of `build/bin/stagger-metric-catalog --out FILE`");
  }
  const doc = JSON.parse(fs.readFileSync(file, "utf8"));
  if (!Array.isArray(doc.metrics) || doc.metrics.length === 0) {
    throw new Error(`${file}: no "metrics" array`);
  }
  const out = {};
  for (const m of doc.metrics) {
    if (!/^stagger_[a-z_]+$/.test(m.name) || !["counter", "gauge", "histogram"].includes(m.type) ||
        !Array.isArray(m.labels)) {
      throw new Error(`${file}: bad metric entry ${JSON.stringify(m).slice(0, 120)}`);
    }
    const labels = {};
    for (const l of m.labels) labels[l.name] = l.values;
    out[m.name] = { type: m.type, exporter: m.exporter, labels };
  }
  return out;
}

// name -> { type, exporter, labels: { label: allowed values array | null (any) } }
const METRICS = {
  ...loadCatalog(),
  // Prometheus' own per-target series.
  up: { type: "gauge", exporter: "prometheus", labels: {} },
};

// Every series name a query may select, histogram families expanded into
// _bucket (with le), _sum and _count: name -> labels spec.
function seriesNames() {
  const out = new Map();
  for (const [name, m] of Object.entries(METRICS)) {
    if (m.type === "histogram") {
      out.set(`${name}_bucket`, { ...m.labels, le: null });
      out.set(`${name}_sum`, m.labels);
      out.set(`${name}_count`, m.labels);
    } else {
      out.set(name, m.labels);
    }
  }
  return out;
}

module.exports = { METRICS, TARGET_LABELS, loadCatalog, seriesNames };
