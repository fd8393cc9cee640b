#include "core/engine/decision.h"

namespace stagger::engine {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kProceed: return "PROCEED";
    case Verdict::kDefer: return "DEFER";
    case Verdict::kGiveUp: return "GIVE_UP";
    case Verdict::kDone: return "DONE";
  }
  return "VERDICT_UNSPECIFIED";
}

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kInitialJitter: return "INITIAL_JITTER";
    case Reason::kBackoff: return "BACKOFF";
    case Reason::kRetryAfter: return "RETRY_AFTER";
    case Reason::kCircuitOpen: return "CIRCUIT_OPEN";
    case Reason::kHalfOpenProbe: return "HALF_OPEN_PROBE";
    case Reason::kBudgetExhausted: return "BUDGET_EXHAUSTED";
    case Reason::kAttemptsExhausted: return "ATTEMPTS_EXHAUSTED";
    case Reason::kNotRetryable: return "NOT_RETRYABLE";
    case Reason::kDeadline: return "DEADLINE";
    case Reason::kSucceeded: return "SUCCEEDED";
    case Reason::kHalfOpenBusy: return "HALF_OPEN_BUSY";
    case Reason::kRetryAfterWindow: return "RETRY_AFTER_WINDOW";
    case Reason::kAdmitted: return "ADMITTED";
    case Reason::kPaced: return "PACED";
    case Reason::kLastChance: return "LAST_CHANCE";
    case Reason::kPaused: return "PAUSED";
    case Reason::kReleased: return "RELEASED";
    case Reason::kEndpointDisabled: return "ENDPOINT_DISABLED";
  }
  return "REASON_UNSPECIFIED";
}

const char* BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed: return "CLOSED";
    case BreakerState::kOpen: return "OPEN";
    case BreakerState::kHalfOpen: return "HALF_OPEN";
  }
  return "BREAKER_STATE_UNSPECIFIED";
}

const char* OpenCauseName(OpenCause c) {
  switch (c) {
    case OpenCause::kNone: return "OPEN_CAUSE_UNSPECIFIED";
    case OpenCause::kConsecutiveFailures: return "CONSECUTIVE_FAILURES";
    case OpenCause::kFailureRatio: return "FAILURE_RATIO";
    case OpenCause::kProbeFailed: return "PROBE_FAILED";
    case OpenCause::kOperator: return "OPERATOR";
  }
  return "OPEN_CAUSE_UNSPECIFIED";
}

const char* DisableTriggerName(DisableTrigger t) {
  switch (t) {
    case DisableTrigger::kNone: return "DISABLE_TRIGGER_UNSPECIFIED";
    case DisableTrigger::kOperator: return "OPERATOR";
    case DisableTrigger::kUnavailable: return "UNAVAILABLE";
    case DisableTrigger::kPermanentFailures: return "PERMANENT_FAILURES";
  }
  return "DISABLE_TRIGGER_UNSPECIFIED";
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kSuccess: return "SUCCESS";
    case Outcome::kRetryableFailure: return "RETRYABLE_FAILURE";
    case Outcome::kTimeout: return "TIMEOUT";
    case Outcome::kRateLimited: return "RATE_LIMITED";
    case Outcome::kNotRetryable: return "PERMANENT_FAILURE";
  }
  return "OUTCOME_UNSPECIFIED";
}

}  // namespace stagger::engine
