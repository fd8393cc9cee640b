// The client's vocabulary: outcomes, verdicts, reasons (numbered exactly as
// their stagger.v1 enums in proto/stagger/v1/coordinator.proto, so a
// mapping is a cast; tests/client/node/types.test.ts holds the two lists
// equal), the requests a worker sends and the Decision it acts on.
//
// Times are milliseconds: durations as numbers of ms (fractions allowed),
// instants as epoch ms on the client's Clock (clock.ts). Pure types.

export enum Outcome {
  SUCCESS = 1,
  RETRYABLE_FAILURE = 2, // 5xx, connection reset, connect error
  TIMEOUT = 3, // no answer within the worker's own timeout
  RATE_LIMITED = 4, // 429 / 503, usually with Retry-After
  PERMANENT_FAILURE = 5, // other 4xx: retrying cannot help
}

export enum Verdict {
  PROCEED = 1, // send after delayMs
  DEFER = 2, // not now: ask again (same attempt) after deferForMs
  GIVE_UP = 3, // permanent: dead-letter; `reason` says why
  DONE = 4, // answer to a SUCCESS report
}

export enum Reason {
  INITIAL_JITTER = 1,
  BACKOFF = 2,
  RETRY_AFTER = 3,
  CIRCUIT_OPEN = 4,
  HALF_OPEN_PROBE = 5,
  BUDGET_EXHAUSTED = 6,
  ATTEMPTS_EXHAUSTED = 7,
  NOT_RETRYABLE = 8,
  DEADLINE = 9,
  SUCCEEDED = 10,
  HALF_OPEN_BUSY = 11,
  RETRY_AFTER_WINDOW = 12,
  ADMITTED = 13,
  PACED = 14,
  LAST_CHANCE = 15,
  PAUSED = 16,
  RELEASED = 17,
  ENDPOINT_DISABLED = 18,
}

// What each reason means, for messages a person reads (from the proto).
export const REASON_MEANING: Readonly<Record<Reason, string>> = {
  [Reason.INITIAL_JITTER]: "first attempt, spread by the initial jitter",
  [Reason.BACKOFF]: "retry delay from the endpoint's policy",
  [Reason.RETRY_AFTER]: "delay set by the endpoint's Retry-After",
  [Reason.CIRCUIT_OPEN]: "the endpoint's circuit breaker is open",
  [Reason.HALF_OPEN_PROBE]: "breaker half-open: this attempt is a probe",
  [Reason.BUDGET_EXHAUSTED]: "the fleet-wide retry budget is empty",
  [Reason.ATTEMPTS_EXHAUSTED]: "the attempt limit is reached",
  [Reason.NOT_RETRYABLE]: "the outcome cannot be helped by retrying",
  [Reason.DEADLINE]:
    "no attempt can start before the delivery's deadline or the policy's usefulness horizon",
  [Reason.SUCCEEDED]: "success recorded",
  [Reason.HALF_OPEN_BUSY]: "breaker half-open and its probe quota is taken",
  [Reason.RETRY_AFTER_WINDOW]: "the endpoint's fleet-wide Retry-After window has not passed",
  [Reason.ADMITTED]: "retry admitted with no further wait",
  [Reason.PACED]: "the endpoint's release queue has no room at its learned pace",
  [Reason.LAST_CHANCE]: "the last attempt that can start before the deadline",
  [Reason.PAUSED]: "an operator paused the endpoint",
  [Reason.RELEASED]: "a waiting Admit was let go early: the endpoint recovered",
  [Reason.ENDPOINT_DISABLED]: "the endpoint is disabled: nothing is sent to it",
};

// The reason's proto name ("CIRCUIT_OPEN"), or "REASON_<n>" for a number
// this build does not know (a newer server's).
export function reasonName(r: Reason): string {
  return Reason[r] ?? `REASON_${r}`;
}

// Admission token of an attempt admitted without the coordinator (local
// fallback): never counted as a half-open probe (coordinator.proto,
// ReportRequest.admission).
export const LOCAL_ADMISSION = 1n;

export interface AdmitRequest {
  endpoint: string; // the endpoint key (endpointKeyFromUrl)
  attempt: number; // 1 for the first attempt
  deadlineMs?: number; // the whole delivery's deadline (epoch ms)
  firstAttemptTimeMs?: number; // when attempt 1 started (epoch ms)
  // Waiting admission: let the coordinator hold the call up to this long
  // (0..60000). The call's deadline is then waitMs + 1000.
  waitMs?: number;
}

export interface ReportRequest {
  endpoint: string;
  attempt: number; // the attempt that just finished
  outcome: Outcome;
  retryAfterMs?: number; // the endpoint's Retry-After (0..1 day)
  deadlineMs?: number;
  firstAttemptTimeMs?: number;
  // The `admission` of the Decision that let this attempt go (echo it).
  admission?: bigint;
}

export type DecisionSource = "coordinator" | "local";

// Why a call was decided locally: the coordinator's gRPC status code name
// ("UNAVAILABLE", "DEADLINE_EXCEEDED", ...; "INTERNAL" for an answer the
// client cannot use) and message.
export interface FallbackCause {
  code: string;
  message: string;
}

export interface Decision {
  verdict: Verdict;
  reason: Reason;
  delayMs: number; // PROCEED: wait this long before sending (>= 0)
  deferForMs: number; // DEFER: ask again after this long (>= 0)
  deferUntilMs: number; // DEFER: the same instant on the client's clock
  // Admit: the request's attempt; failure Report: attempt + 1.
  attempt: number;
  // PROCEED to an Admit: the token to echo in this attempt's Report.
  // Coordinator answers carry the coordinator's (0 from one without
  // tokens); local decisions carry LOCAL_ADMISSION.
  admission: bigint;
  // The replica that answered has set Decision.wait_supported (on this
  // answer or an earlier one): it holds waiting Admits.
  waitSupported: boolean;
  source: DecisionSource;
  replica?: string; // source "coordinator": the answering replica's name
  fallbackCause?: FallbackCause; // source "local"
}

// The coordinator as the delivery loop needs it: StaggerClient, or a
// scripted fake in tests. admit/report reject with InvalidArgumentError
// for bad input, and admit with an AbortError when `signal` fires.
export interface Coordinator {
  admit(req: AdmitRequest, signal?: AbortSignal): Promise<Decision>;
  report(req: ReportRequest): Promise<Decision>;
}
