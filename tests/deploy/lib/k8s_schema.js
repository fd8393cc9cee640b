// Schema validation of rendered Kubernetes objects, offline.
//
// validateObject(obj) runs the kubernetes-models validator for the object's
// apiVersion/kind (core and apps from `kubernetes-models`, ServiceMonitor and
// PrometheusRule from `@kubernetes-models/prometheus-operator`, Certificate
// from `@kubernetes-models/cert-manager`) AND finds
// field names the schema does not know, which those validators accept
// silently (their schemas do not set additionalProperties: false).
//
// How unknown fields are found: the validators are compiled JSON-schema code
// that reads every property the schema declares (`data.replicas`,
// `data.selector`, ... present or not) and enumerates the keys of maps
// (labels, annotations, ConfigMap data). The object is validated through a
// Proxy that records, per JSON path, which keys the validator read and
// whether it enumerated the keys. A key present in the object that the
// validator never read, in an object whose keys it did not enumerate, is not
// in the schema. An object whose schema declares no properties at all
// (free-form) is read by nothing and enumerated by nothing: it is accepted,
// and listed in `freeForm`; an object the validator never reached (a value
// in a map it did not inspect) is listed in `unvisited`. Callers that want
// every field checked require both lists to be empty.
"use strict";

const path = require("node:path");

// apiVersion group -> npm package holding its models.
const PACKAGES = {
  "": "kubernetes-models",
  apps: "kubernetes-models",
  policy: "kubernetes-models",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "cert-manager.io": "@kubernetes-models/cert-manager",
};

function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    throw new Error("object has no string apiVersion/kind");
  }
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  const pkg = PACKAGES[group];
  if (!pkg) throw new Error(`no schema package for apiVersion ${apiVersion}`);
  if (!/^[A-Za-z0-9]+$/.test(kind) || !/^[a-z0-9]+$/.test(version)) {
    throw new Error(`malformed apiVersion/kind ${apiVersion} ${kind}`);
  }
  const mod = `${pkg}/${group ? group + "/" : ""}${version}/${kind}`;
  let exported;
  try {
    exported = require(mod);
  } catch (e) {
    throw new Error(`no schema for ${apiVersion} ${kind} (${mod})`);
  }
  const Model = exported[kind];
  if (typeof Model !== "function" || typeof Model.prototype.validate !== "function") {
    throw new Error(`no model class ${kind} in ${mod}`);
  }
  return Model;
}

// JSON-pointer segment escaping (RFC 6901), so paths read like the
// validators' own instancePath values.
function seg(key) {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

// Validates `obj`; returns { errors: [strings], freeForm: [paths],
// unvisited: [paths] } (paths as JSON pointers, "" = the object).
function validateObject(obj) {
  const errors = [];
  let Model;
  try {
    Model = modelFor(obj && obj.apiVersion, obj && obj.kind);
  } catch (e) {
    return { errors: [e.message], freeForm: [], unvisited: [] };
  }

  // path -> { keys: Set of keys read, enumerated: bool }
  const records = new Map();
  function record(p) {
    let r = records.get(p);
    if (!r) {
      r = { keys: new Set(), enumerated: false };
      records.set(p, r);
    }
    return r;
  }
  function wrap(value, p) {
    if (value === null || typeof value !== "object") return value;
    const rec = record(p);
    return new Proxy(value, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver);
        if (typeof key !== "string") return v;
        rec.keys.add(key);
        if (Object.prototype.hasOwnProperty.call(target, key)) {
          return wrap(v, `${p}/${seg(key)}`);
        }
        return v;
      },
      has(target, key) {
        if (typeof key === "string") rec.keys.add(key);
        return Reflect.has(target, key);
      },
      ownKeys(target) {
        rec.enumerated = true;
        return Reflect.ownKeys(target);
      },
    });
  }

  try {
    Model.prototype.validate.call(wrap(obj, ""));
  } catch (e) {
    errors.push(`schema: ${e.message}`);
  }

  const freeForm = [];
  const unvisited = [];
  (function walk(value, p) {
    if (value === null || typeof value !== "object") return;
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, `${p}/${i}`));
      return;
    }
    const rec = records.get(p);
    // Never read by the validator: under a map whose values it did not
    // inspect. Nothing can be said about it; listed for the caller.
    if (!rec) {
      unvisited.push(p || "/");
      return;
    }
    if (rec.enumerated) {
      for (const k of Object.keys(value)) walk(value[k], `${p}/${seg(k)}`);
      return;
    }
    if (rec.keys.size === 0) {
      if (Object.keys(value).length > 0) freeForm.push(p || "/");
      return;
    }
    for (const k of Object.keys(value)) {
      if (!rec.keys.has(k)) {
        errors.push(`unknown field ${p}/${seg(k)}`);
        continue; // its children are not in the schema either
      }
      walk(value[k], `${p}/${seg(k)}`);
    }
  })(obj, "");

  return { errors, freeForm, unvisited };
}

// Human name of an object for messages: "Deployment stagger/staggerd".
function describe(obj) {
  const m = (obj && obj.metadata) || {};
  return `${obj && obj.kind} ${m.namespace ? m.namespace + "/" : ""}${m.name}`;
}

module.exports = { validateObject, modelFor, describe, PACKAGES, _root: path.resolve(__dirname, "..") };
