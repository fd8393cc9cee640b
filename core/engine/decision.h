// Engine vocabulary: what a worker tells the engine (AdmitInput, ReportInput)
// and what the engine answers (Decision). Plain values; the gRPC layer maps
// them to and from stagger.v1 protos one to one (same names, same meaning;
// see proto/stagger/v1/coordinator.proto for the contract of each field).
#ifndef STAGGER_CORE_ENGINE_DECISION_H_
#define STAGGER_CORE_ENGINE_DECISION_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stagger::engine {

enum class Outcome : uint8_t {
  kSuccess = 1,
  kRetryableFailure = 2,
  kTimeout = 3,
  kRateLimited = 4,
  kNotRetryable = 5,  // on the wire: PERMANENT_FAILURE
};

enum class Verdict : uint8_t {
  kProceed = 1,  // send after `delay`
  kDefer = 2,    // call Admit again at `defer_until`; no attempt consumed
  kGiveUp = 3,   // permanent: dead-letter
  kDone = 4,     // success recorded
};

// Values equal the proto enum stagger.v1.Reason.
enum class Reason : uint8_t {
  kInitialJitter = 1,
  kBackoff = 2,
  kRetryAfter = 3,
  kCircuitOpen = 4,
  kHalfOpenProbe = 5,
  kBudgetExhausted = 6,
  kAttemptsExhausted = 7,
  kNotRetryable = 8,
  kDeadline = 9,
  kSucceeded = 10,
  kHalfOpenBusy = 11,
  kRetryAfterWindow = 12,
  kAdmitted = 13,
  // DEFER: the endpoint's release queue has no room at its learned pace now.
  kPaced = 14,
  // PROCEED: the last attempt that can start before the deadline (it goes
  // even through an open breaker or a Retry-After window).
  kLastChance = 15,
  // DEFER: an operator paused the endpoint (stagger.v1.Admin/Pause, the
  // engine's PauseTable): held until the pause ends.
  kPaused = 16,
  // PROCEED: a waiting Admit let go before its wait ran out (the endpoint
  // showed it recovered and its learned pace had room).
  kReleased = 17,
  // GIVE_UP: the endpoint is disabled (by an operator, stagger.v1.Admin/
  // Disable, or by its policy's disable trigger): nothing is sent to it
  // until it is enabled again.
  kEndpointDisabled = 18,
};
inline constexpr int kMaxReason = 18;

enum class BreakerState : uint8_t { kClosed = 1, kOpen = 2, kHalfOpen = 3 };
inline constexpr int kNumBreakerStates = 3;

const char* VerdictName(Verdict v);        // "PROCEED", ...
const char* ReasonName(Reason r);          // "INITIAL_JITTER", ...
const char* BreakerStateName(BreakerState s);  // "CLOSED", ...
const char* OutcomeName(Outcome o);        // "SUCCESS", ...

// Why a breaker opened (a watcher's ConditionChange says it).
enum class OpenCause : uint8_t {
  kNone = 0,                 // not OPEN, or not known (a restored state)
  kConsecutiveFailures = 1,  // breaker.consecutive_failures in a row
  kFailureRatio = 2,         // breaker.failure_ratio over its window
  kProbeFailed = 3,          // a half-open probe failed
  kOperator = 4,             // stagger.v1.Admin/ForceBreaker
};
const char* OpenCauseName(OpenCause c);  // "CONSECUTIVE_FAILURES", ...

// What disabled an endpoint (disable_table.h; a watcher's ConditionChange
// says it).
enum class DisableTrigger : uint8_t {
  kNone = 0,
  kOperator = 1,           // stagger.v1.Admin/Disable
  kUnavailable = 2,        // policy disable.after_unavailable: the breaker
                           // stayed away from CLOSED that long
  kPermanentFailures = 3,  // policy disable.permanent_failures within
                           // disable.window
};
inline constexpr int kMaxDisableTrigger = 3;
const char* DisableTriggerName(DisableTrigger t);  // "OPERATOR", ...

struct BreakerTransition {
  BreakerState from;
  BreakerState to;
};

// Admission tokens (proto: Decision.admission, ReportRequest.admission):
// what let an attempt go, echoed by the worker in the attempt's Report so
// that only a probe's success can close a half-open breaker.
inline constexpr uint64_t kNoAdmission = 0;     // not echoed (read as before
                                                // tokens: may be a probe)
inline constexpr uint64_t kLocalAdmission = 1;  // admitted without the
                                                // coordinator (a lease, a
                                                // client's fallback)
inline constexpr uint64_t kCoordinatorAdmission = 2;  // by the coordinator,
                                                      // not as a probe
// A probe's token has this bit; the rest names the engine and the
// half-open period (admission.h).
inline constexpr uint64_t kProbeAdmissionBit = uint64_t{1} << 63;

struct Decision {
  Verdict verdict = Verdict::kProceed;
  Reason reason = Reason::kAdmitted;
  // kProceed: wait this long before sending (>= 0).
  absl::Duration delay = absl::ZeroDuration();
  // kDefer: call Admit again at this instant.
  absl::Time defer_until = absl::InfinitePast();
  // The attempt this decision is about (Admit: the request's; failure
  // Report: the next one).
  int attempt = 0;
  // kProceed to an Admit: the admission token (above); 0 otherwise.
  uint64_t admission = kNoAdmission;

  // Facts for metrics; they do not change what the worker does.
  bool retry_after_seen = false;     // the report carried a Retry-After
  bool retry_after_clamped = false;  // ... and it was above retry_after_max
  bool untracked = false;  // table full: decided from fresh, unstored state
  bool pace_cut = false;   // an overload cut the endpoint's learned pace
  int num_transitions = 0;           // 0..2 breaker transitions caused
  BreakerTransition transitions[2] = {};
};

// Inputs. `endpoint` is only borrowed for the duration of the call.
struct AdmitInput {
  absl::string_view endpoint;
  int attempt = 1;                                // >= 1
  absl::Time deadline = absl::InfiniteFuture();   // caller's deadline
  absl::Time first_attempt_time = absl::InfinitePast();  // unknown
  // Waiting admission: how long the caller lets the coordinator hold the
  // call, 0..kMaxWait (0: answer at once).
  absl::Duration wait = absl::ZeroDuration();
};

struct ReportInput {
  absl::string_view endpoint;
  int attempt = 1;  // the attempt that finished, >= 1
  Outcome outcome = Outcome::kSuccess;
  // The endpoint's Retry-After, if it sent one: 0..kMaxRetryAfter.
  std::optional<absl::Duration> retry_after;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time first_attempt_time = absl::InfinitePast();
  // The admission token of the Admit that let this attempt go (above).
  uint64_t admission = kNoAdmission;
};

// Retry-After values above this are refused as bad input (a header that
// says "come back in a year" is broken, not a plan). Values up to it are
// accepted and clamped to the policy's retry_after_max.
inline constexpr absl::Duration kMaxRetryAfter = absl::Hours(24);
// AdmitInput::wait values above this are refused as bad input.
inline constexpr absl::Duration kMaxWait = absl::Seconds(60);

// Waiting admission (AdmitInput::wait; proto AdmitRequest.wait). The engine
// keeps no waiting calls: their holder (staggerd's wait room) keeps this per
// call and asks Engine::AdmitWaiting at each step:
//   kArrive   the call came in: answer now, or hold it;
//   kRecheck  something may have changed (an event, or `recheck` came):
//             release it now (PROCEED, RELEASED or HALF_OPEN_PROBE or
//             LAST_CHANCE), or keep holding;
//   kExpire   its wait ran out: the answer an Admit gets now.
enum class WaitStep : uint8_t { kArrive, kRecheck, kExpire };
struct WaitState {
  absl::Time since = absl::InfinitePast();  // arrival
  absl::Time until = absl::InfiniteFuture();  // expiry (the holder's)
  // Set at arrival: it could have gone at once (a retry asked during its
  // backoff): only evidence that the endpoint recovered since `since` (a
  // success, the end of a Retry-After window) lets it go before `until`.
  bool backoff = false;
};
struct WaitOutcome {
  std::optional<Decision> answer;      // set: answer now; else hold
  // Holding: look again by then at the latest (an event may come sooner).
  absl::Time recheck = absl::InfiniteFuture();
  // Holding: the endpoint's gates hold it (the calls behind it in line are
  // held too); false: only its own backoff does.
  bool gated = true;
};


}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_DECISION_H_
