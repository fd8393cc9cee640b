// Every vector of tests/vectors/client_vectors.json (the one truth shared
// with the C++ and Python clients) through the TypeScript client: HTTP
// status -> outcome, Retry-After with the file's fixed now, URL -> key or
// error, request -> validation message (the local checks, and the client's
// fallback path), duration text, stable hashes and rendezvous owners.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  checkAdmit,
  checkReport,
  endpointKeyFromUrl,
  formatDuration,
  InvalidArgumentError,
  Outcome,
  outcomeFromHttpStatus,
  parseRetryAfter,
  Rendezvous,
  stableHash,
  StaggerClient,
} from "../../../client/node/src/index";
import { admitFromVector, expand, loadVectors, reportFromVector } from "./helpers";

const v = loadVectors();

test("http_status: every status maps to the vector's outcome", () => {
  assert.ok(v.http_status.length > 0);
  for (const c of v.http_status) {
    assert.equal(Outcome[outcomeFromHttpStatus(c.status)], c.outcome, `status ${c.status}`);
  }
});

test("retry_after: every header parses to the vector's ms (or none) at the fixed now", () => {
  const now = v.retry_after.now_unix_seconds * 1000;
  assert.ok(v.retry_after.cases.length > 0);
  for (const c of v.retry_after.cases) {
    assert.equal(parseRetryAfter(c.header, now) ?? null, c.ms, `header ${JSON.stringify(c.header)}`);
  }
});

test("endpoint_key: every URL gives the vector's key or its exact error", () => {
  assert.ok(v.endpoint_key.length > 0);
  for (const c of v.endpoint_key) {
    const url = expand(c.url);
    const what = `url ${JSON.stringify(url).slice(0, 80)} segments ${c.path_segments}`;
    if (c.error !== undefined) {
      assert.throws(() => endpointKeyFromUrl(url, c.path_segments), (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError, what);
        assert.equal(e.message, c.error, what);
        return true;
      });
    } else {
      assert.equal(endpointKeyFromUrl(url, c.path_segments), c.key, what);
    }
  }
});

test("validation: the local checks give each request the vector's exact message", () => {
  assert.ok(v.validation.length > 0);
  for (const c of v.validation) {
    const got = c.call === "Admit" ? checkAdmit(admitFromVector(c.request)) : checkReport(reportFromVector(c.request));
    assert.equal(got ?? null, c.error, c.name);
  }
});

test("validation: the client deciding locally (no coordinator) rejects with the same errors", async () => {
  // Port 1 on loopback: nothing listens, every call falls back.
  const client = await StaggerClient.create({ target: "127.0.0.1:1", callDeadlineMs: 1000 });
  try {
    for (const c of v.validation) {
      const call =
        c.call === "Admit" ? client.admit(admitFromVector(c.request)) : client.report(reportFromVector(c.request));
      if (c.error === null) {
        const d = await call;
        assert.equal(d.source, "local", c.name);
      } else {
        await assert.rejects(call, (e: unknown) => {
          assert.ok(e instanceof InvalidArgumentError, c.name);
          assert.equal(e.message, c.error, c.name);
          return true;
        });
      }
    }
  } finally {
    client.close();
  }
});

test("duration_text: absl::FormatDuration's text for every duration", () => {
  assert.ok(v.duration_text.length > 0);
  for (const c of v.duration_text) {
    const ns = BigInt(c.seconds) * 1_000_000_000n + BigInt(c.nanos);
    assert.equal(formatDuration(ns), c.text, `${c.seconds}s ${c.nanos}ns`);
  }
});

test("stable_hash: FNV-1a 64 + splitmix64, bit for bit", () => {
  assert.ok(v.stable_hash.length > 0);
  for (const c of v.stable_hash) {
    assert.equal(stableHash(c.input).toString(16).padStart(16, "0"), c.hash, JSON.stringify(c.input));
  }
});

test("rendezvous: every key's owner among its replicas", () => {
  assert.ok(v.rendezvous.length > 0);
  for (const c of v.rendezvous) {
    const ring = new Rendezvous(c.replicas);
    assert.equal(c.replicas[ring.owner(c.key)], c.owner, `${c.key} over ${c.replicas.join(",")}`);
  }
});
