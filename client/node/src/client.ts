// StaggerClient: Admit and Report against a stagger-agent or a set of
// coordinator replicas, with the C++ client's contract
// (client/coordinator_client.h):
//
//   * Target: "unix:/path" (an agent, one member), "host:port", a list
//     ("a:1,b:2" or "name=host:port,..."), or "dns:///host:port"
//     (members.ts). Each endpoint key is owned by one replica by rendezvous
//     hashing over the names (rendezvous.ts, staggerd's hashing); a call
//     goes to the first replica in the key's order that is up and serving,
//     then to one that is up, so only a down replica's keys move.
//   * Every call has a deadline: callDeadlineMs (default 50 ms); an Admit
//     with waitMs > 0 gets waitMs + 1000 (coordinator.proto, wait).
//   * INVALID_ARGUMENT from the coordinator rejects with an
//     InvalidArgumentError carrying its message; never a fallback.
//   * Any other failure (any status, or an answer it cannot use) marks that
//     replica down (replica.ts: not called again for recheckIntervalMs,
//     then probed) and the call is decided locally: fail-open, by
//     LocalEngine (local_engine.ts) after the server's own checks
//     (validation.ts) -- so bad input is the same InvalidArgumentError
//     there too. Local decisions have source "local", a fallbackCause,
//     and admission LOCAL_ADMISSION (1) when they PROCEED an Admit.
//   * Coordinator decisions carry the replica's admission token (echo it in
//     the Report of that attempt: the delivery loop does) and, as the
//     answer says, whether the replica holds waiting calls
//     (waitSupported). A DONE to anything but a success report is passed
//     on as it came (the delivery loop ends "error").
//   * The local engine decides on localPolicy (policy.ts; staggerd's
//     defaults), with `random` as its uniform source.
//   * Batches (admitBatch, reportBatch) are split by the replica each key
//     routes to and put back in order; staggerd's batch checks run first
//     when they are split (see admitBatch).
//   * An AbortSignal passed to admit() cancels the call (CancelledError);
//     the replica is not blamed.
//   * close() stops every timer and channel; call it when done.
import { credentials, Metadata, status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";

import { realClock, type Clock } from "./clock";
import { CancelledError, InvalidArgumentError } from "./errors";
import type { Decision as WireDecision } from "./gen/stagger/v1/coordinator";
import { LocalEngine, type LocalDecision } from "./local_engine";
import { parseMembers, resolveDnsMembers, sortedByName, type Member, type MemberResolver, type MemberSpec } from "./members";
import { checkPolicy, DEFAULT_POLICY, IDLE_EVICTION_MS, type LocalPolicy, type Random } from "./policy";
import { Rendezvous } from "./rendezvous";
import { Replica } from "./replica";
import {
  LOCAL_ADMISSION,
  Verdict,
  type AdmitRequest,
  type Coordinator,
  type Decision,
  type FallbackCause,
  type ReportRequest,
} from "./types";
import { checkAdmit, checkReport } from "./validation";
import { admitToWire, decisionFromWire, reportToWire, unencodable } from "./wire";

export interface ClientOptions {
  // Default "127.0.0.1:50051". See members.ts for the forms.
  target?: string;
  // Deadline of every call, ms: (0, 60000]. Default 50.
  callDeadlineMs?: number;
  // A failed replica is not called again for this long, then probed:
  // (0, 3600000] ms. Default 1000. Also its channel's reconnect backoff cap.
  recheckIntervalMs?: number;
  // How often a dns:/// target is resolved again: (0, 3600000] ms.
  // Default 5000.
  dnsRefreshMs?: number;
  // Where a dns:/// target's members come from. Default resolveDnsMembers.
  resolveMembers?: MemberResolver;
  // Channel credentials (credentials.createSsl(...) for TLS / mTLS).
  // Default: plaintext.
  credentials?: ChannelCredentials;
  // TLS: the name expected in the coordinator's certificate.
  tlsServerName?: string;
  clock?: Clock; // default: Date.now
  random?: Random; // the local engine's uniform source; default Math.random
  // The local fallback's policy (fields not given: staggerd's defaults).
  // Keep it equal to the coordinator's for fallback to decide as it does.
  localPolicy?: Partial<LocalPolicy>;
}

// Counters for the host's own metrics (the C++ client's stagger_client_*).
export interface ClientStats {
  // Decisions made locally, by call and verdict name.
  fallbackDecisions: Record<"admit" | "report", Record<string, number>>;
  // Coordinator calls that failed and fell back, by gRPC status code name.
  coordinatorErrors: Record<string, number>;
}

// One RPC: send it on `stub`, call `cb` with the error or the answer.
type Send<W> = (
  stub: Replica["stub"],
  md: Metadata,
  opts: { deadline: number },
  cb: (err: ServiceError | null, wire: W | undefined) => void,
) => { cancel(): void };

// staggerd's default limits.max_batch_size: the local checks' limit.
export const MAX_BATCH_SIZE = 1000;

const CONSIDERED_DOWN = "coordinator considered down (recheck interval not over); not called";
const HEALTH_INTERVAL_MS = 250;
const EVICTION_PERIOD_MS = Math.min(
  Math.max(IDLE_EVICTION_MS / 10, 1000),
  60_000,
);

interface View {
  ring?: Rendezvous; // none while there are no members
  replicas: Replica[]; // replicas[i] is named ring.names[i]
}

// The option errors, one per line, as the C++ client's Create.
function checkOptions(o: ClientOptions): string[] {
  const errors: string[] = [];
  try {
    parseMembers(o.target ?? "127.0.0.1:50051");
  } catch (e) {
    errors.push((e as Error).message);
  }
  const range = (name: string, v: number | undefined, max: number, maxText: string) => {
    if (v !== undefined && !(v > 0 && v <= max)) errors.push(`${name}: must be in (0, ${maxText}], is ${v}ms`);
  };
  range("dns_refresh", o.dnsRefreshMs, 3_600_000, "1h");
  range("call_deadline", o.callDeadlineMs, 60_000, "1m");
  range("recheck_interval", o.recheckIntervalMs, 3_600_000, "1h");
  errors.push(...checkPolicy({ ...DEFAULT_POLICY, ...o.localPolicy }));
  return errors;
}

export class StaggerClient implements Coordinator {
  private view: View = { replicas: [] };
  private readonly local: LocalEngine;
  private readonly clock: Clock;
  private readonly callDeadlineMs: number;
  private readonly recheckIntervalMs: number;
  private readonly dnsRefreshMs: number;
  private readonly creds: ChannelCredentials;
  private readonly timers: NodeJS.Timeout[] = [];
  private closed = false;
  private readonly counts: ClientStats = {
    fallbackDecisions: { admit: {}, report: {} },
    coordinatorErrors: {},
  };

  // Throws an Error listing every bad option (one per line). For a
  // dns:/// target the first resolution is awaited (a failure leaves no
  // members: calls are decided locally until one succeeds).
  static async create(options: ClientOptions = {}): Promise<StaggerClient> {
    const errors = checkOptions(options);
    if (errors.length > 0) throw new InvalidArgumentError(errors.join("\n"));
    const client = new StaggerClient(options, parseMembers(options.target ?? "127.0.0.1:50051"));
    await client.start();
    return client;
  }

  private constructor(
    private readonly options: ClientOptions,
    private readonly spec: MemberSpec,
  ) {
    this.clock = options.clock ?? realClock;
    this.local = new LocalEngine(options.random ?? Math.random, Object.freeze({ ...DEFAULT_POLICY, ...options.localPolicy }));
    this.callDeadlineMs = options.callDeadlineMs ?? 50;
    this.recheckIntervalMs = options.recheckIntervalMs ?? 1000;
    this.dnsRefreshMs = options.dnsRefreshMs ?? 5000;
    this.creds = options.credentials ?? credentials.createInsecure();
  }

  private async start(): Promise<void> {
    let members = this.spec.members;
    if (this.spec.dnsHost !== "") members = (await this.resolve()) ?? [];
    this.view = this.makeView(members, undefined);
    const evict = setInterval(() => this.local.evictIdle(this.clock.now()), EVICTION_PERIOD_MS);
    evict.unref();
    this.timers.push(evict);
    if (this.spec.dnsHost !== "") this.scheduleDnsRefresh();
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const r of this.view.replicas) r.close();
  }

  async admit(req: AdmitRequest, signal?: AbortSignal): Promise<Decision> {
    if (signal?.aborted) throw new CancelledError();
    const bad = unencodable(req);
    if (bad !== undefined) throw new InvalidArgumentError(bad);
    const deadlineMs = (req.waitMs ?? 0) > 0 ? req.waitMs! + 1000 : this.callDeadlineMs;
    return this.callOrFallback<WireDecision, Decision>(
      this.route(req.endpoint),
      (stub, md, opts, cb) => stub.admit(admitToWire(req), md, opts, (err, resp) => cb(err, resp?.decision)),
      deadlineMs,
      signal,
      (wire, r) => this.fromWire(wire, r),
      (cause) => this.decideLocally("admit", req, cause),
    );
  }

  async report(req: ReportRequest): Promise<Decision> {
    const bad = unencodable(req);
    if (bad !== undefined) throw new InvalidArgumentError(bad);
    return this.callOrFallback<WireDecision, Decision>(
      this.route(req.endpoint),
      (stub, md, opts, cb) => stub.report(reportToWire(req), md, opts, (err, resp) => cb(err, resp?.decision)),
      this.callDeadlineMs,
      undefined,
      (wire, r) => this.fromWire(wire, r),
      (cause) => this.decideLocally("report", req, cause),
    );
  }

  // Batch forms: 1..1000 items (staggerd's default limits.max_batch_size),
  // one decision per item, in order. Split by the replica each key routes
  // to: a batch that all goes to one place is sent whole (the server checks
  // it); otherwise staggerd's checks run here first, with its messages
  // ("items[3].endpoint: ...", "items: a batch holds 1..1000 items ..."),
  // so a bad item fails the whole batch before any part is sent; the parts
  // go at once and a part whose replica fails is decided locally.
  async admitBatch(items: readonly AdmitRequest[]): Promise<Decision[]> {
    return this.batch("admit", items, (stub, part, md, opts, cb) =>
      stub.admitBatch({ items: part.map(admitToWire) }, md, opts, (err, resp) => cb(err, resp?.decisions)),
    );
  }

  async reportBatch(items: readonly ReportRequest[]): Promise<Decision[]> {
    return this.batch("report", items, (stub, part, md, opts, cb) =>
      stub.reportBatch({ items: part.map(reportToWire) }, md, opts, (err, resp) => cb(err, resp?.decisions)),
    );
  }

  // Whether calls go to the coordinator now (at least one replica up).
  coordinatorUp(): boolean {
    return this.view.replicas.some((r) => r.up);
  }

  replicas(): Member[] {
    return this.view.replicas.map((r) => ({ name: r.name, target: r.target }));
  }

  // The replica that owns `key` by hashing alone (whatever its health).
  ownerOf(key: string): Member | undefined {
    const { ring, replicas } = this.view;
    if (ring === undefined) return undefined;
    const r = replicas[ring.owner(key)]!;
    return { name: r.name, target: r.target };
  }

  // Waits up to timeoutMs (real time) for every replica's channel to be
  // ready; true if all were.
  async waitForCoordinator(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const ready = await Promise.all(
      this.view.replicas.map(
        (r) => new Promise<boolean>((resolve) => r.stub.waitForReady(deadline, (err) => resolve(!err))),
      ),
    );
    return ready.every(Boolean);
  }

  stats(): ClientStats {
    return structuredClone(this.counts);
  }

  // ---- calls -------------------------------------------------------------

  // One RPC to `replica` (or, for none, the local decision at once): its
  // converted answer; INVALID_ARGUMENT as the error; the caller's abort as
  // CancelledError; anything else, or an answer `convert` refuses (a
  // string), marks the replica down and returns local(cause).
  private callOrFallback<W, R>(
    replica: Replica | undefined,
    send: Send<W>,
    deadlineMs: number,
    signal: AbortSignal | undefined,
    convert: (wire: W | undefined, replica: Replica) => R | string,
    local: (cause: FallbackCause) => R,
  ): Promise<R> {
    if (replica === undefined) {
      return Promise.resolve().then(() => local({ code: "UNAVAILABLE", message: CONSIDERED_DOWN }));
    }
    return new Promise<R>((resolve, reject) => {
      const onAbort = () => inFlight.cancel();
      const inFlight = send(replica.stub, new Metadata(), { deadline: Date.now() + deadlineMs }, (err, wire) => {
        signal?.removeEventListener("abort", onAbort);
        try {
          if (err === null) {
            const got = convert(wire, replica);
            if (typeof got !== "string") {
              replica.markUp();
              return resolve(got);
            }
            return resolve(this.fail(replica, "INTERNAL", got, local));
          }
          if (err.code === status.INVALID_ARGUMENT) {
            replica.markUp(); // it answered: it is up, the request is bad
            throw new InvalidArgumentError(err.details);
          }
          if (err.code === status.CANCELLED && signal?.aborted) throw new CancelledError();
          resolve(this.fail(replica, status[err.code] ?? String(err.code), `coordinator: ${err.details}`, local));
        } catch (e) {
          reject(e);
        }
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  // A coordinator's decision as the client's, or why it is unusable.
  private fromWire(wire: WireDecision | undefined, replica: Replica): Decision | string {
    const d = decisionFromWire(wire, this.clock.now());
    if (typeof d === "string") return d;
    return { ...d, waitSupported: wire!.waitSupported, source: "coordinator", replica: replica.name };
  }

  private async batch<Req extends AdmitRequest | ReportRequest>(
    call: "admit" | "report",
    items: readonly Req[],
    send: (stub: Replica["stub"], part: Req[], md: Metadata, opts: { deadline: number }, cb: (err: ServiceError | null, d: WireDecision[] | undefined) => void) => { cancel(): void },
  ): Promise<Decision[]> {
    items.forEach((item, i) => {
      const bad = unencodable(item);
      if (bad !== undefined) throw new InvalidArgumentError(`items[${i}].${bad}`);
    });
    // Each replica's tryUse() is asked once per batch.
    const tried = new Map<Replica, boolean>();
    const owners = items.map((item) => this.route(item.endpoint, (r) => {
      if (!tried.has(r)) tried.set(r, r.tryUse());
      return tried.get(r)!;
    }));
    const local = (part: Req[]) => (cause: FallbackCause) => this.decideBatchLocally(call, part, cause);
    const convert = (n: number) => (wire: WireDecision[] | undefined, r: Replica): Decision[] | string => {
      if (wire === undefined || wire.length !== n) return "coordinator answered a batch of the wrong size";
      const out: Decision[] = [];
      for (const w of wire) {
        const d = this.fromWire(w, r);
        if (typeof d === "string") return d;
        out.push(d);
      }
      return out;
    };
    const deadline = this.callDeadlineMs;
    if (items.length === 0 || owners.every((o) => o === owners[0])) {
      const whole = [...items];
      return this.callOrFallback(owners[0], (stub, md, opts, cb) => send(stub, whole, md, opts, cb),
        deadline, undefined, convert(whole.length), local(whole));
    }
    this.checkBatch(call, items);
    const parts = new Map<Replica | undefined, number[]>();
    owners.forEach((o, i) => parts.set(o, [...(parts.get(o) ?? []), i]));
    const out: Decision[] = new Array(items.length);
    await Promise.all([...parts].map(async ([replica, index]) => {
      const part = index.map((i) => items[i]!);
      const got = await this.callOrFallback(replica, (stub, md, opts, cb) => send(stub, part, md, opts, cb),
        deadline, undefined, convert(part.length), local(part));
      index.forEach((i, j) => (out[i] = got[j]!));
    }));
    return out;
  }

  // staggerd's batch checks: the size, then every item ("items[i]." first).
  private checkBatch(call: "admit" | "report", items: readonly (AdmitRequest | ReportRequest)[]): void {
    if (items.length < 1 || items.length > MAX_BATCH_SIZE) {
      throw new InvalidArgumentError(
        `items: a batch holds 1..${MAX_BATCH_SIZE} items (limits.max_batch_size), got ${items.length}`,
      );
    }
    items.forEach((item, i) => {
      const max = this.local.policy.maxKeyBytes;
      const bad = call === "admit" ? checkAdmit(item as AdmitRequest, max) : checkReport(item as ReportRequest, max);
      if (bad !== undefined) throw new InvalidArgumentError(`items[${i}].${bad}`);
    });
  }

  private decideBatchLocally(call: "admit" | "report", items: (AdmitRequest | ReportRequest)[], cause: FallbackCause) {
    this.checkBatch(call, items); // a bad item changes nothing
    return items.map((item) => this.decideLocally(call, item, cause));
  }

  private fail<R>(replica: Replica, code: string, message: string, local: (c: FallbackCause) => R): R {
    replica.markDown();
    this.counts.coordinatorErrors[code] = (this.counts.coordinatorErrors[code] ?? 0) + 1;
    return local({ code, message });
  }

  // Fail-open: the server's checks, then the local engine.
  private decideLocally(call: "admit" | "report", req: AdmitRequest | ReportRequest, cause: FallbackCause): Decision {
    const now = this.clock.now();
    let d: LocalDecision;
    if (call === "admit") {
      const bad = checkAdmit(req as AdmitRequest, this.local.policy.maxKeyBytes);
      if (bad !== undefined) throw new InvalidArgumentError(bad);
      d = this.local.admit(req as AdmitRequest, now);
    } else {
      const bad = checkReport(req as ReportRequest, this.local.policy.maxKeyBytes);
      if (bad !== undefined) throw new InvalidArgumentError(bad);
      d = this.local.report(req as ReportRequest, now);
    }
    const byVerdict = this.counts.fallbackDecisions[call];
    const name = Verdict[d.verdict];
    byVerdict[name] = (byVerdict[name] ?? 0) + 1;
    const admitted = call === "admit" && d.verdict === Verdict.PROCEED;
    return {
      verdict: d.verdict,
      reason: d.reason,
      delayMs: d.delayMs,
      deferForMs: d.verdict === Verdict.DEFER ? Math.max(0, d.deferUntilMs - now) : 0,
      deferUntilMs: d.verdict === Verdict.DEFER ? d.deferUntilMs : 0,
      attempt: d.attempt,
      admission: admitted ? LOCAL_ADMISSION : 0n,
      waitSupported: false,
      source: "local",
      fallbackCause: cause,
    };
  }

  // ---- routing and membership -----------------------------------------------

  // The replica a call about `key` goes to: the first in the key's order
  // that is serving and usable, else the first usable; none: decide locally.
  // `usable` claims a down replica's probe (Replica.tryUse by default).
  private route(key: string, usable = (r: Replica) => r.tryUse()): Replica | undefined {
    const { ring, replicas } = this.view;
    if (replicas.length === 1) return usable(replicas[0]!) ? replicas[0] : undefined;
    if (ring === undefined) return undefined;
    const rank = ring.rank(key);
    for (const servingOnly of [true, false]) {
      for (const i of rank) {
        const r = replicas[i]!;
        if (servingOnly && !r.serving) continue;
        if (usable(r)) return r;
      }
    }
    return undefined;
  }

  // A view of `members`, keeping the replicas of `old` whose name and
  // target are unchanged (and closing the others).
  private makeView(members: readonly Member[], old: View | undefined): View {
    const several = members.length > 1 || this.spec.dnsHost !== "";
    const replicas = members.map(
      (m) =>
        old?.replicas.find((r) => r.name === m.name && r.target === m.target) ??
        new Replica(m.name, m.target, {
          credentials: this.creds,
          channelOptions: this.channelOptions(),
          recheckIntervalMs: this.recheckIntervalMs,
          healthIntervalMs: several ? HEALTH_INTERVAL_MS : 0,
          clock: this.clock,
        }),
    );
    for (const r of old?.replicas ?? []) if (!replicas.includes(r)) r.close();
    return members.length === 0
      ? { replicas: [] }
      : { ring: new Rendezvous(members.map((m) => m.name)), replicas };
  }

  private channelOptions() {
    const recheck = Math.max(100, Math.min(this.recheckIntervalMs, 2 ** 31 - 1));
    return {
      // Reconnect at least every recheck interval, so a probe finds a fresh
      // connection attempt rather than a long reconnect backoff.
      "grpc.initial_reconnect_backoff_ms": Math.min(recheck, 1000),
      "grpc.max_reconnect_backoff_ms": recheck,
      // The deadline and the fallback are the retry policy.
      "grpc.enable_retries": 0,
      "grpc.use_local_subchannel_pool": 1,
      ...(this.options.tlsServerName !== undefined
        ? { "grpc.ssl_target_name_override": this.options.tlsServerName }
        : {}),
    };
  }

  private async resolve(): Promise<Member[] | undefined> {
    const resolver = this.options.resolveMembers ?? resolveDnsMembers;
    try {
      const found = await resolver(this.spec.dnsHost, this.spec.dnsPort);
      return found.length === 0 ? undefined : sortedByName(found);
    } catch {
      return undefined; // keep the members last seen
    }
  }

  private scheduleDnsRefresh(): void {
    const period = this.view.replicas.length === 0 ? 1000 : this.dnsRefreshMs;
    const t = setTimeout(async () => {
      this.timers.splice(this.timers.indexOf(t), 1);
      const found = await this.resolve();
      if (this.closed) return;
      const old = this.view;
      const same = found !== undefined && found.length === old.replicas.length &&
        found.every((m, i) => m.name === old.replicas[i]!.name && m.target === old.replicas[i]!.target);
      if (found !== undefined && !same) this.view = this.makeView(found, old);
      this.scheduleDnsRefresh();
    }, period);
    t.unref();
    this.timers.push(t);
  }
}
