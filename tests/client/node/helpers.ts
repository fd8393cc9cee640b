// Shared test helpers for the TypeScript client's tests (node --test):
// the repository's vectors file, request building from its proto-JSON
// form, a fake clock, a scripted coordinator, and staggerd started on a
// free loopback port. Everything started here is stopped by its owner.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";

import {
  Outcome,
  Reason,
  Verdict,
  type AdmitRequest,
  type Clock,
  type Coordinator,
  type Decision,
  type ReportRequest,
  type Sleep,
} from "../../../client/node/src/index";

// The repository root: $STAGGER_SOURCE_DIR (ctest sets it; the compiled
// tests live in the build folder, with no fixed path to the sources).
export function repoRoot(): string {
  const root = process.env["STAGGER_SOURCE_DIR"];
  if (!root) throw new Error("set STAGGER_SOURCE_DIR to the repository's root (ctest does)");
  return root;
}

// A vectors-file string: a plain string, or {prefix, repeat, times, suffix}.
export type VString = string | { prefix?: string; repeat: string; times: number; suffix?: string };
export function expand(s: VString): string {
  if (typeof s === "string") return s;
  return (s.prefix ?? "") + s.repeat.repeat(s.times) + (s.suffix ?? "");
}

export interface Vectors {
  http_status: { status: number; outcome: string }[];
  retry_after: { now_unix_seconds: number; cases: { header: string; ms: number | null }[] };
  endpoint_key: { url: VString; path_segments: number; key?: string; error?: string }[];
  validation: {
    name: string;
    call: "Admit" | "Report";
    request: Record<string, unknown>;
    error: string | null;
    pending_cpp?: boolean;
  }[];
  duration_text: { seconds: number; nanos: number; text: string }[];
  rendezvous: { key: string; replicas: string[]; owner: string }[];
  stable_hash: { input: string; hash: string }[];
}

export function loadVectors(): Vectors {
  const file = path.join(repoRoot(), "tests", "vectors", "client_vectors.json");
  return JSON.parse(readFileSync(file, "utf8")) as Vectors;
}

// A proto-JSON Duration ("-0.5s", "60.000000001s") as exact nanoseconds.
export function durationNanos(text: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(text);
  if (m === null) throw new Error(`not a proto-JSON Duration: ${text}`);
  const ns = BigInt(m[2]!) * 1_000_000_000n + BigInt((m[3] ?? "").padEnd(9, "0"));
  return m[1] === "-" ? -ns : ns;
}

const nanosToMs = (ns: bigint) => Number(ns) / 1e6;

// A vectors-file request (proto JSON, snake_case) as the client's request.
export function admitFromVector(r: Record<string, unknown>): AdmitRequest {
  const out: AdmitRequest = {
    endpoint: expand((r["endpoint"] as VString | undefined) ?? ""),
    attempt: (r["attempt"] as number | undefined) ?? 0,
  };
  if (r["wait"] !== undefined) out.waitMs = nanosToMs(durationNanos(r["wait"] as string));
  return out;
}

export function reportFromVector(r: Record<string, unknown>): ReportRequest {
  const o = r["outcome"];
  const outcome =
    o === undefined || o === "OUTCOME_UNSPECIFIED"
      ? 0
      : typeof o === "number"
        ? o
        : Outcome[o as keyof typeof Outcome];
  const out: ReportRequest = {
    endpoint: expand((r["endpoint"] as VString | undefined) ?? ""),
    attempt: (r["attempt"] as number | undefined) ?? 0,
    outcome: outcome as Outcome,
  };
  if (r["retry_after"] !== undefined) {
    out.retryAfterMs = nanosToMs(durationNanos(r["retry_after"] as string));
  }
  return out;
}

// Time that moves only when something sleeps on it.
export class FakeClock implements Clock {
  readonly slept: number[] = [];
  constructor(public t = 1_767_225_600_000) {}
  now(): number {
    return this.t;
  }
  readonly sleep: Sleep = async (ms, signal) => {
    if (signal?.aborted) return false;
    this.slept.push(ms);
    this.t += Math.max(0, ms);
    return true;
  };
}

// A decision with the fields a test names; the rest neutral.
export function decision(p: Partial<Decision> & { verdict: Verdict }): Decision {
  return {
    reason: Reason.ADMITTED,
    delayMs: 0,
    deferForMs: 0,
    deferUntilMs: 0,
    attempt: 1,
    admission: 0n,
    waitSupported: false,
    source: "coordinator",
    ...p,
  };
}

// Answers from a script, one per call, and records every call.
export class ScriptedCoordinator implements Coordinator {
  readonly calls: ({ call: "admit"; req: AdmitRequest } | { call: "report"; req: ReportRequest })[] = [];
  constructor(private readonly script: (Decision | Error)[]) {}
  private next(): Promise<Decision> {
    const d = this.script.shift();
    if (d === undefined) return Promise.reject(new Error("script exhausted"));
    return d instanceof Error ? Promise.reject(d) : Promise.resolve(d);
  }
  admit(req: AdmitRequest): Promise<Decision> {
    this.calls.push({ call: "admit", req });
    return this.next();
  }
  report(req: ReportRequest): Promise<Decision> {
    this.calls.push({ call: "report", req });
    return this.next();
  }
}

// staggerd on 127.0.0.1, port 0 (its "listening on" line names the port),
// metrics off. $STAGGERD names the binary (ctest sets it).
export interface Staggerd {
  proc: ChildProcess;
  target: string; // "127.0.0.1:<port>"
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function staggerdBinary(): string | undefined {
  return process.env["STAGGERD"] || undefined;
}

export async function startStaggerd(binary: string, timeoutMs = 30_000): Promise<Staggerd> {
  const proc = spawn(binary, ["--address=127.0.0.1:0", "--metrics_address="], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const target = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`staggerd did not start in ${timeoutMs} ms:\n${text}`)), timeoutMs);
    const onData = (b: Buffer) => {
      text += b.toString();
      const m = /listening on \S*?:(\d+)/.exec(text);
      if (m !== null) {
        clearTimeout(timer);
        resolve(`127.0.0.1:${m[1]}`);
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`staggerd exited (${code}) before listening:\n${text}`));
    });
  });
  return {
    proc,
    target,
    output: () => text,
    kill: async (signal: NodeJS.Signals = "SIGKILL") => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      await exited;
    },
  };
}
