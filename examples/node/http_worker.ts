// The TypeScript worker of the HTTP end-to-end run (scenario.py;
// docs/EXAMPLE.md): real HTTP POSTs to --url through client/node, against
// --target (a stagger-agent's socket, unix:/path). The C++ worker's
// contract (http_worker.cc):
//   * the endpoint key is endpointKeyFromUrl(--url, 1);
//   * the --warmup_ids one after another, then the --ids all at once (a
//     promise each), every delivery a DeliveryLoop.run over one shared
//     StaggerClient, deadline --deadline_s from its start;
//   * an attempt is one POST (node:http, no connection reuse) with the body
//     {"id", "attempt", "worker"}, aborted by the loop's signal at
//     --attempt_timeout_s (reported TIMEOUT), its status mapped by
//     outcomeFromHttpStatus and its Retry-After by parseRetryAfter; a
//     request that fails (refused, reset) throws: RETRYABLE_FAILURE;
//   * a run that ends "deferred" is parked for deferForMs (a timer) and run
//     again from nextAttempt.
// It writes --out, the JSON http_worker.cc documents (end SUCCEEDED | GAVE_UP |
// CANCELLED | ERROR).
//
//   node worker.js --target=unix:/tmp/a.sock --url=http://127.0.0.1:8080/hooks/t0k3n --ids=a,b --out=result.json
import { writeFileSync } from "node:fs";
import * as http from "node:http";

import {
  DeliveryLoop,
  Outcome,
  StaggerClient,
  Verdict,
  endpointKeyFromUrl,
  outcomeFromHttpStatus,
  parseRetryAfter,
  reasonName,
  type AdmitRequest,
  type AttemptResult,
  type Coordinator,
  type Decision,
  type ReportRequest,
} from "../../client/node/src/index";

interface Flags {
  target: string;
  url: string;
  name: string;
  warmupIds: string[];
  ids: string[];
  deadlineS: number;
  attemptTimeoutS: number;
  callDeadlineS: number;
  out: string;
}

// --name=value flags; every one named in `defaults` or required.
function parseFlags(argv: string[]): Flags {
  const v: Record<string, string> = {
    name: "typescript", warmup_ids: "", ids: "", deadline_s: "300",
    attempt_timeout_s: "60", call_deadline_s: "5",
  };
  for (const a of argv) {
    const m = /^--([a-z_]+)=(.*)$/s.exec(a);
    if (m === null) throw new Error(`${a}: expected --name=value`);
    v[m[1]!] = m[2]!;
  }
  for (const required of ["target", "url", "out"]) {
    if (!v[required]) throw new Error(`--${required} is required`);
  }
  const seconds = (name: string) => {
    const n = Number(v[name]);
    if (!(n > 0)) throw new Error(`--${name}: expected seconds > 0, got ${v[name]}`);
    return n;
  };
  const list = (s: string) => s.split(",").filter((x) => x !== "");
  return {
    target: v["target"]!, url: v["url"]!, name: v["name"]!, out: v["out"]!,
    warmupIds: list(v["warmup_ids"]!), ids: list(v["ids"]!),
    deadlineS: seconds("deadline_s"), attemptTimeoutS: seconds("attempt_timeout_s"),
    callDeadlineS: seconds("call_deadline_s"),
  };
}

type Event = Record<string, string | number>;

function eventOf(call: string, attempt: number, askedMs: number, waitMs: number, d: Decision): Event {
  return {
    call, attempt, asked: askedMs / 1000, answered: Date.now() / 1000, wait: waitMs / 1000,
    verdict: Verdict[d.verdict] ?? String(d.verdict), reason: reasonName(d.reason),
    source: d.source, delay: d.delayMs / 1000, defer_for: d.deferForMs / 1000,
  };
}

// Passes every call to the shared client and keeps an event of it. One per
// delivery: its loop calls one at a time.
class RecordingCoordinator implements Coordinator {
  readonly events: Event[] = [];
  constructor(private readonly inner: StaggerClient) {}

  async admit(req: AdmitRequest, signal?: AbortSignal): Promise<Decision> {
    const asked = Date.now();
    const d = await this.inner.admit(req, signal);
    this.events.push(eventOf("admit", req.attempt, asked, req.waitMs ?? 0, d));
    return d;
  }

  async report(req: ReportRequest): Promise<Decision> {
    const asked = Date.now();
    const d = await this.inner.report(req);
    const e = eventOf("report", req.attempt, asked, 0, d);
    e["outcome"] = Outcome[req.outcome] ?? String(req.outcome);
    if (req.retryAfterMs !== undefined) e["retry_after"] = req.retryAfterMs / 1000;
    this.events.push(e);
    return d;
  }
}

// One attempt: POST `body`; the answer's status and Retry-After.
function post(url: URL, body: string, signal: AbortSignal): Promise<AttemptResult> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "POST",
      agent: false,
      signal,
      headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Connection: "close" },
    }, (res) => {
      res.resume(); // the body is not needed
      res.on("end", () => {
        const ra = res.headers["retry-after"];
        resolve({
          outcome: outcomeFromHttpStatus(res.statusCode ?? 0),
          retryAfterMs: ra === undefined ? undefined : parseRetryAfter(ra, Date.now()),
        });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

interface Delivery {
  id: string;
  end: string;
  reason: string | null;
  error: string | null;
  attempts: number;
  events: Event[];
}

async function deliver(client: StaggerClient, key: string, url: URL, f: Flags, id: string): Promise<Delivery> {
  const recorder = new RecordingCoordinator(client);
  const loop = new DeliveryLoop(recorder, {
    deadlineMs: Date.now() + f.deadlineS * 1000,
    attemptTimeoutMs: f.attemptTimeoutS * 1000,
  });
  const send = (attempt: number, signal: AbortSignal) =>
    post(url, JSON.stringify({ id, attempt, worker: f.name }), signal);
  const d: Delivery = { id, end: "ERROR", reason: null, error: null, attempts: 0, events: recorder.events };
  let from: { nextAttempt: number; firstAttemptTimeMs?: number } = { nextAttempt: 1 };
  for (;;) {
    const r = await loop.run(key, send, from);
    d.attempts += r.attemptsMade;
    if (r.end === "deferred") { // parked: back after deferForMs
      await new Promise((wake) => setTimeout(wake, r.deferForMs ?? 0));
      from = { nextAttempt: r.nextAttempt, ...(r.firstAttemptTimeMs !== undefined ? { firstAttemptTimeMs: r.firstAttemptTimeMs } : {}) };
      continue;
    }
    d.end = r.end.toUpperCase();
    if (r.end === "gave_up" && r.lastDecision !== undefined) d.reason = reasonName(r.lastDecision.reason);
    if (r.end === "error") d.error = r.message;
    return d;
  }
}

async function main(): Promise<void> {
  const f = parseFlags(process.argv.slice(2));
  const url = new URL(f.url);
  if (url.protocol !== "http:") throw new Error(`--url: expected http://host:port/path, got ${f.url}`);
  const key = endpointKeyFromUrl(f.url, 1);
  const client = await StaggerClient.create({ target: f.target, callDeadlineMs: f.callDeadlineS * 1000 });
  const results: Delivery[] = [];
  try {
    for (const id of f.warmupIds) results.push(await deliver(client, key, url, f, id));
    process.stderr.write(`${f.name}: ${f.warmupIds.length} warm-up deliveries done; ${f.ids.length} at once\n`);
    results.push(...(await Promise.all(f.ids.map((id) => deliver(client, key, url, f, id)))));
  } finally {
    client.close();
  }
  writeFileSync(f.out, JSON.stringify({ worker: f.name, endpoint_key: key, deliveries: results }));
  process.stderr.write(`${f.name}: done\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`worker: ${(e as Error).message}\n`);
  process.exit(2);
});
