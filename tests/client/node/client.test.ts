// StaggerClient against fake coordinators (fake_coordinator.ts) on
// loopback and a Unix socket: routing by rendezvous owner, what a decision
// carries (admission tokens both ways, wait_supported, DEFER times), the
// waiting call's deadline, cancellation, INVALID_ARGUMENT, unusable
// answers, replicas going down (next choice, recheck interval, fallback),
// draining replicas, dns:/// membership, option errors.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";

import { status } from "@grpc/grpc-js";

import { HealthCheckResponse_ServingStatus } from "../../../client/node/src/gen/grpc/health/v1/health";
import {
  CancelledError,
  InvalidArgumentError,
  Outcome,
  Reason,
  Rendezvous,
  StaggerClient,
  Verdict,
  type Member,
} from "../../../client/node/src/index";
import { FakeCoordinator, PROCEED } from "./fake_coordinator";
import { FakeClock } from "./helpers";

const started: { stop(): void }[] = [];
const clients: StaggerClient[] = [];
after(() => {
  for (const c of clients) c.close();
  for (const f of started) f.stop();
});

async function fakes(n: number): Promise<FakeCoordinator[]> {
  const out = await Promise.all(Array.from({ length: n }, () => new FakeCoordinator().start()));
  started.push(...out);
  return out;
}

async function client(opts: Parameters<typeof StaggerClient.create>[0]): Promise<StaggerClient> {
  const c = await StaggerClient.create({ callDeadlineMs: 2_000, ...opts });
  clients.push(c);
  return c;
}

// Polls `cond` every 20 ms for up to `timeoutMs` (generous: a slow machine).
async function eventually(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) assert.fail(`timed out waiting for: ${what}`);
    await delay(20);
  }
}

const keys = Array.from({ length: 30 }, (_, i) => `https://tenant-${i}.example/`);

test("each call goes to its key's rendezvous owner among the named replicas", async () => {
  const fs = await fakes(3);
  const names = ["stagger-0", "stagger-1", "stagger-2"];
  const c = await client({ target: fs.map((f, i) => `${names[i]}=${f.target}`).join(",") });
  const ring = new Rendezvous(names);
  for (const key of keys) {
    const d = await c.admit({ endpoint: key, attempt: 1 });
    assert.equal(d.source, "coordinator");
    assert.equal(d.replica, names[ring.owner(key)], key);
    assert.equal(c.ownerOf(key)?.name, names[ring.owner(key)]);
  }
  for (const [i, f] of fs.entries()) {
    assert.deepEqual(f.admits.map((a) => a.endpoint), keys.filter((k) => ring.owner(k) === i));
  }
});

test("admission tokens: the coordinator's arrives whole, the report's goes out whole", async () => {
  const [f] = await fakes(1);
  f!.answer = (call) => ({
    decision: call === "admit" ? { ...PROCEED, admission: 0xfedcba9876543210n } : { ...PROCEED, verdict: Verdict.DONE, reason: Reason.SUCCEEDED },
  });
  const c = await client({ target: f!.target });
  const d = await c.admit({ endpoint: "k", attempt: 1 });
  assert.equal(d.admission, 0xfedcba9876543210n);
  await c.report({ endpoint: "k", attempt: 1, outcome: Outcome.SUCCESS, admission: d.admission, retryAfterMs: 1500 });
  assert.equal(f!.reports[0]!.admission, 0xfedcba9876543210n);
  assert.deepEqual(f!.reports[0]!.retryAfter, { seconds: 1n, nanos: 500_000_000 });
});

test("wait_supported is each answer's own; the waiting call gets wait + 1 s, not the 50 ms deadline", async () => {
  const [f] = await fakes(1);
  let first = true;
  f!.answer = (_call, req) => {
    const answer = { decision: { ...PROCEED, waitSupported: first } };
    first = false;
    return "wait" in req && req.wait !== undefined ? { ...answer, holdMs: 300 } : answer;
  };
  const c = await client({ target: f!.target, callDeadlineMs: 50 });
  await c.waitForCoordinator(20_000);
  assert.equal((await c.admit({ endpoint: "k", attempt: 1 })).waitSupported, true);
  const held = await c.admit({ endpoint: "k", attempt: 2, waitMs: 300 });
  assert.equal(held.source, "coordinator", `held call fell back: ${JSON.stringify(held.fallbackCause)}`);
  assert.equal(held.waitSupported, false, "this answer did not say so");
  assert.deepEqual(f!.admits[1]!.wait, { seconds: 0n, nanos: 300_000_000 });
});

test("an AbortSignal cancels a held call without blaming the replica", async () => {
  const [f] = await fakes(1);
  f!.answer = (_call, req) => ({ decision: PROCEED, holdMs: "wait" in req && req.wait ? 10_000 : 0 });
  const c = await client({ target: f!.target });
  const ac = new AbortController();
  const call = c.admit({ endpoint: "k", attempt: 1, waitMs: 10_000 }, ac.signal);
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(call, CancelledError);
  assert.ok(c.coordinatorUp());
  assert.equal((await c.admit({ endpoint: "k", attempt: 1 })).source, "coordinator");
  await assert.rejects(c.admit({ endpoint: "k", attempt: 1 }, AbortSignal.abort()), CancelledError);
});

test("DEFER: the time comes from defer_for (client clock), else from defer_until", async () => {
  const [f] = await fakes(1);
  const clock = new FakeClock();
  f!.answer = (_c, req) => ({
    decision: {
      ...PROCEED, verdict: Verdict.DEFER, reason: Reason.CIRCUIT_OPEN,
      deferUntil: { seconds: 4_000_000_000n, nanos: 0 },
      ...(req.attempt === 1 ? { deferFor: { seconds: 2n, nanos: 500_000_000 } } : {}),
    },
  });
  const c = await client({ target: f!.target, clock });
  const byFor = await c.admit({ endpoint: "k", attempt: 1 });
  assert.equal(byFor.deferForMs, 2_500);
  assert.equal(byFor.deferUntilMs, clock.t + 2_500);
  const byUntil = await c.admit({ endpoint: "k", attempt: 2 });
  assert.equal(byUntil.deferUntilMs, 4_000_000_000_000);
  assert.equal(byUntil.deferForMs, 4_000_000_000_000 - clock.t);
});

test("INVALID_ARGUMENT reaches the caller as a named error with the server's message; never a fallback", async () => {
  const [f] = await fakes(1);
  f!.answer = () => ({ error: { code: status.INVALID_ARGUMENT, details: "endpoint: must not be empty" } });
  const c = await client({ target: f!.target });
  await assert.rejects(c.admit({ endpoint: "", attempt: 1 }), (e: unknown) => {
    assert.ok(e instanceof InvalidArgumentError);
    assert.equal(e.message, "endpoint: must not be empty");
    assert.equal(e.field, "endpoint");
    return true;
  });
  assert.ok(c.coordinatorUp(), "the replica answered: still up");
  assert.deepEqual(c.stats().coordinatorErrors, {});
  // What cannot even be encoded is refused before any call.
  await assert.rejects(c.admit({ endpoint: "k", attempt: 1.5 }), /attempt: must be in \[1, 1000000\], got 1.5/);
  await assert.rejects(c.admit({ endpoint: "ab\ud800", attempt: 1 }), { message: "endpoint: not valid UTF-8 at byte 2" });
  await assert.rejects(c.admit({ endpoint: "k", attempt: 1, waitMs: NaN }), { message: "wait: must be a finite number of milliseconds, got NaN" });
  assert.equal(f!.admits.length, 1);
});

test("an answer without a usable decision falls back, counted as INTERNAL", async () => {
  const [f] = await fakes(1);
  f!.answer = () => ({});
  const c = await client({ target: f!.target });
  const d = await c.report({ endpoint: "k", attempt: 1, outcome: Outcome.RETRYABLE_FAILURE });
  assert.equal(d.source, "local");
  assert.deepEqual(d.fallbackCause, { code: "INTERNAL", message: "coordinator answered no decision" });
  assert.equal(d.verdict, Verdict.PROCEED);
  assert.equal(d.reason, Reason.BACKOFF);
  assert.equal(c.stats().coordinatorErrors["INTERNAL"], 1);
  assert.equal(c.stats().fallbackDecisions.report["PROCEED"], 1);
});

test("nobody answering: local decisions; not called again until the recheck interval, then probed", async () => {
  const clock = new FakeClock();
  const c = await client({ target: "127.0.0.1:1", clock, recheckIntervalMs: 1_000 });
  const first = await c.admit({ endpoint: "k", attempt: 1 });
  assert.equal(first.source, "local");
  assert.equal(first.admission, 1n, "a locally admitted attempt is marked 1");
  assert.match(first.fallbackCause!.code, /^(UNAVAILABLE|DEADLINE_EXCEEDED)$/);
  assert.match(first.fallbackCause!.message, /^coordinator: /);
  assert.equal(c.coordinatorUp(), false);
  const second = await c.admit({ endpoint: "k", attempt: 1 });
  assert.equal(second.fallbackCause!.message, "coordinator considered down (recheck interval not over); not called");
  clock.t += 1_000;
  const probe = await c.admit({ endpoint: "k", attempt: 1 });
  assert.match(probe.fallbackCause!.message, /^coordinator: /, "probed after the interval");
  const s = c.stats();
  assert.equal(Object.values(s.coordinatorErrors).reduce((a, b) => a + b, 0), 2);
  assert.equal(s.fallbackDecisions.admit["PROCEED"], 3);
});

test("a replica that goes away: its keys move to their next choice, the others stay, then come back", async () => {
  const fs = await fakes(3);
  const names = ["a", "b", "c"];
  const clock = new FakeClock();
  const c = await client({ target: fs.map((f, i) => `${names[i]}=${f.target}`).join(","), clock });
  const ring = new Rendezvous(names);
  const mine = keys.filter((k) => ring.owner(k) === 0);
  const others = keys.filter((k) => ring.owner(k) !== 0);
  fs[0]!.stop();
  const firstCall = await c.admit({ endpoint: mine[0]!, attempt: 1 });
  assert.equal(firstCall.source, "local", "the failing call itself is decided locally");
  for (const key of mine) {
    const d = await c.admit({ endpoint: key, attempt: 1 });
    assert.equal(d.source, "coordinator", key);
    assert.equal(d.replica, names[ring.rank(key)[1]!], `${key}: its second choice`);
  }
  for (const key of others) {
    assert.equal((await c.admit({ endpoint: key, attempt: 1 })).replica, names[ring.owner(key)], key);
  }
  assert.ok(c.coordinatorUp());
  // Back on the same address: probed once the recheck interval is over.
  const back = await new FakeCoordinator().start(fs[0]!.target);
  started.push(back);
  await eventually("a's keys back on a", async () => {
    clock.t += 1_000;
    return (await c.admit({ endpoint: mine[0]!, attempt: 1 })).replica === "a";
  });
});

test("a draining replica (health NOT_SERVING) is skipped while it still answers", async () => {
  const fs = await fakes(2);
  const c = await client({ target: `x=${fs[0]!.target},y=${fs[1]!.target}` });
  const ring = new Rendezvous(["x", "y"]);
  const key = keys.find((k) => ring.owner(k) === 0)!;
  assert.equal((await c.admit({ endpoint: key, attempt: 1 })).replica, "x");
  fs[0]!.serving = HealthCheckResponse_ServingStatus.NOT_SERVING;
  await eventually("x's keys on y", async () => (await c.admit({ endpoint: key, attempt: 1 })).replica === "y");
  fs[0]!.serving = HealthCheckResponse_ServingStatus.SERVING;
  await eventually("x's keys back", async () => (await c.admit({ endpoint: key, attempt: 1 })).replica === "x");
});

test("dns:/// members come from the resolver and follow it", async () => {
  const fs = await fakes(2);
  let members: Member[] = [{ name: "stagger-0", target: fs[0]!.target }];
  const asked: string[] = [];
  const c = await client({
    target: "dns:///stagger-headless.ns.svc:50051",
    dnsRefreshMs: 50,
    resolveMembers: async (host, port) => {
      asked.push(`${host}:${port}`);
      return members;
    },
  });
  assert.equal(asked[0], "stagger-headless.ns.svc:50051");
  assert.deepEqual(c.replicas(), members);
  members = [...members, { name: "stagger-1", target: fs[1]!.target }];
  await eventually("the second member", () => c.replicas().length === 2);
  const ring = new Rendezvous(["stagger-0", "stagger-1"]);
  const key = keys.find((k) => ring.owner(k) === 1)!;
  assert.equal((await c.admit({ endpoint: key, attempt: 1 })).replica, "stagger-1");
});

test("an agent on a Unix socket is one member", async () => {
  const sock = path.join(tmpdir(), `stagger-node-client-${process.pid}.sock`);
  rmSync(sock, { force: true });
  const f = await new FakeCoordinator().start(`unix:${sock}`);
  started.push(f);
  const c = await client({ target: `unix:${sock}` });
  assert.deepEqual(c.replicas(), [{ name: `unix:${sock}`, target: `unix:${sock}` }]);
  const d = await c.admit({ endpoint: "k", attempt: 1 });
  assert.equal(d.source, "coordinator");
  assert.equal(f.admits.length, 1);
});

test("batches: split by owner, sent at once, answered in order; a down part is decided locally", async () => {
  const fs = await fakes(3);
  const names = ["a", "b", "c"];
  for (const f of fs) f.answer = (_call, req) => ({ decision: { ...PROCEED, attempt: req.attempt } });
  const clock = new FakeClock();
  const c = await client({ target: fs.map((f, i) => `${names[i]}=${f.target}`).join(","), clock });
  const ring = new Rendezvous(names);
  const items = keys.slice(0, 12).map((endpoint, i) => ({ endpoint, attempt: i + 1 }));
  const got = await c.admitBatch(items);
  assert.deepEqual(got.map((d) => d.attempt), items.map((x) => x.attempt), "in order");
  assert.deepEqual(got.map((d) => d.replica), items.map((x) => names[ring.owner(x.endpoint)]));
  for (const [i, f] of fs.entries()) {
    const mine = items.filter((x) => ring.owner(x.endpoint) === i);
    assert.deepEqual(f.batches, mine.length > 0 ? [mine.length] : [], `one batch for ${names[i]}`);
  }
  fs[2]!.stop();
  const reports = items.map((x) => ({ ...x, outcome: Outcome.SUCCESS }));
  const after = await c.reportBatch(reports);
  for (const [i, d] of after.entries()) {
    const down = ring.owner(items[i]!.endpoint) === 2;
    assert.equal(d.source, down ? "local" : "coordinator", items[i]!.endpoint);
    assert.equal(d.verdict, down ? Verdict.DONE : Verdict.PROCEED);
  }
});

test("batches: a bad item fails the whole split batch before any part is sent, with staggerd's message", async () => {
  const fs = await fakes(2);
  const c = await client({ target: `x=${fs[0]!.target},y=${fs[1]!.target}` });
  const items = keys.slice(0, 6).map((endpoint) => ({ endpoint, attempt: 1 }));
  items[3]!.attempt = 0;
  await assert.rejects(c.admitBatch(items), { message: "items[3].attempt: must be in [1, 1000000], got 0" });
  await assert.rejects(c.admitBatch([]), { message: "items: a batch holds 1..1000 items (limits.max_batch_size), got 0" });
  await assert.rejects(
    c.reportBatch(keys.slice(0, 6).map((endpoint, i) => ({ endpoint, attempt: 1, outcome: i === 5 ? (0 as Outcome) : Outcome.SUCCESS }))),
    { message: "items[5].outcome: must be set" },
  );
  assert.deepEqual([...fs[0]!.batches, ...fs[1]!.batches], []);
});

test("bad options are refused, every one named", async () => {
  await assert.rejects(StaggerClient.create({ target: "a:1,,b:2", callDeadlineMs: 0, recheckIntervalMs: 7_200_000 }), (e: unknown) => {
    assert.ok(e instanceof InvalidArgumentError);
    assert.equal(
      e.message,
      [
        "target: entry 2 is empty",
        "call_deadline: must be in (0, 1m], is 0ms",
        "recheck_interval: must be in (0, 1h], is 7200000ms",
      ].join("\n"),
    );
    return true;
  });
});
