// Targets -> members and their names, as the C++ client's target_parser_test:
// one target, lists (DNS first labels, explicit names, address literals),
// every bad list's message, dns:///, the system resolver, sorting; and the
// client's enums numbered as the generated stagger.v1 enums.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as wire from "../../../client/node/src/gen/stagger/v1/coordinator";
import { Outcome, parseMembers, Reason, REASON_MEANING, resolveDnsMembers, Verdict } from "../../../client/node/src/index";
import { sortedByName } from "../../../client/node/src/members";

test("one target is one member, named by the whole target (an agent's socket too)", () => {
  assert.deepEqual(parseMembers("127.0.0.1:50051").members, [{ name: "127.0.0.1:50051", target: "127.0.0.1:50051" }]);
  assert.deepEqual(parseMembers(" unix:/run/stagger/agent.sock ").members, [
    { name: "unix:/run/stagger/agent.sock", target: "unix:/run/stagger/agent.sock" },
  ]);
});

test("a list names each member: first DNS label, name=, else the whole entry", () => {
  const s = parseMembers(
    "stagger-0.stagger-headless.ns.svc:50051, stagger-1.stagger-headless.ns.svc:50051," +
      "odd=10.0.0.7:50051,10.0.0.8:50051,[::1]:50051,localhost:7",
  );
  assert.deepEqual(s.members, [
    { name: "stagger-0", target: "stagger-0.stagger-headless.ns.svc:50051" },
    { name: "stagger-1", target: "stagger-1.stagger-headless.ns.svc:50051" },
    { name: "odd", target: "10.0.0.7:50051" },
    { name: "10.0.0.8:50051", target: "10.0.0.8:50051" },
    { name: "[::1]:50051", target: "[::1]:50051" },
    { name: "localhost:7", target: "localhost:7" },
  ]);
  assert.equal(parseMembers("127.0.0.1:1,127.0.0.1:2").members.length, 2);
});

test("bad lists say which entry and what is wrong", () => {
  for (const [target, message] of [
    ["", "target: must not be empty"],
    ["  ", "target: must not be empty"],
    ["a:1,,b:2", "target: entry 2 is empty"],
    ["a:1,b", 'target: entry 2 ("b"): expected host:port'],
    ["a:1,=b:2", `target: entry 2 ("=b:2"): empty name before '='`],
    ["s-0.x:1,s-0.y:2", 'target: entry 2 ("s-0.y:2"): the name "s-0" is taken by another entry; name it (name=host:port)'],
    ["dns:///a:1,b:2", 'target: dns:/// takes one host:port, got "a:1,b:2"'],
    ["dns:///nohostport", 'target: dns:/// takes one host:port, got "nohostport"'],
  ]) {
    assert.throws(() => parseMembers(target!), { message }, target);
  }
});

test("dns:/// takes one host and port", () => {
  assert.deepEqual(parseMembers("dns:///stagger-headless.ns.svc.cluster.local:50051"), {
    members: [],
    dnsHost: "stagger-headless.ns.svc.cluster.local",
    dnsPort: "50051",
  });
});

test("the system resolver: localhost gives named members on the port; a bad name is an error", async () => {
  const m = await resolveDnsMembers("localhost", "7");
  assert.ok(m.length > 0);
  for (const x of m) {
    assert.notEqual(x.name, "");
    assert.match(x.target, /:7$/);
  }
  await assert.rejects(resolveDnsMembers("no-such-host.invalid", "7"), /^Error: dns:\/\/\/no-such-host.invalid:7: /);
});

test("members sort by name, keeping the first of each", () => {
  assert.deepEqual(
    sortedByName([
      { name: "b", target: "10.0.0.2:1" },
      { name: "a", target: "10.0.0.1:1" },
      { name: "b", target: "10.0.0.9:1" },
    ]),
    [
      { name: "a", target: "10.0.0.1:1" },
      { name: "b", target: "10.0.0.2:1" },
    ],
  );
});

test("Outcome, Verdict and Reason are numbered as their stagger.v1 enums, every value, both ways", () => {
  const same = (ours: Record<string, string | number>, theirs: Record<string, string | number>, skip: string[]) => {
    const names = (e: Record<string, string | number>) =>
      Object.keys(e).filter((k) => Number.isNaN(Number(k)) && !skip.includes(k) && e[k] !== -1);
    assert.deepEqual(names(ours).sort(), names(theirs).sort());
    for (const k of names(ours)) assert.equal(ours[k], theirs[k], k);
  };
  same(Outcome, wire.Outcome, ["OUTCOME_UNSPECIFIED", "UNRECOGNIZED"]);
  same(Verdict, wire.Verdict, ["VERDICT_UNSPECIFIED", "UNRECOGNIZED"]);
  same(Reason, wire.Reason, ["REASON_UNSPECIFIED", "UNRECOGNIZED"]);
  for (const v of Object.values(Reason)) if (typeof v === "number") assert.ok(REASON_MEANING[v as Reason], String(v));
});
