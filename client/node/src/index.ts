// @stagger/client: the public surface. See README.md for a worker.
export { StaggerClient, type ClientOptions, type ClientStats } from "./client";
export {
  DeliveryLoop,
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  MIN_PARK_MS,
  type AttemptFn,
  type AttemptResult,
  type DeliveryEnd,
  type DeliveryEvent,
  type DeliveryOptions,
  type DeliveryResult,
  type ResumePoint,
} from "./delivery_loop";
export { realClock, realSleep, type Clock, type Sleep } from "./clock";
export { formatDuration, formatMs } from "./duration";
export { endpointKeyFromUrl, MAX_PATH_SEGMENTS, MAX_URL_BYTES } from "./endpoint_key";
export { CancelledError, InvalidArgumentError, ProtocolError } from "./errors";
export { MAX_RETRY_AFTER_MS, outcomeFromHttpStatus, parseRetryAfter } from "./http_outcome";
export { LocalEngine } from "./local_engine";
export { parseMembers, resolveDnsMembers, type Member, type MemberResolver } from "./members";
export { checkPolicy, DEFAULT_POLICY, type LocalPolicy, type Random } from "./policy";
export { Rendezvous, stableHash } from "./rendezvous";
export {
  LOCAL_ADMISSION,
  Outcome,
  Reason,
  REASON_MEANING,
  reasonName,
  Verdict,
  type AdmitRequest,
  type Coordinator,
  type Decision,
  type DecisionSource,
  type FallbackCause,
  type ReportRequest,
} from "./types";
export { checkAdmit, checkReport, MAX_WAIT_MS } from "./validation";
