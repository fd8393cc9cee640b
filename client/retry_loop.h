// RetryLoop: one delivery's admit -> (wait) -> attempt -> report -> (wait)
// -> admit ... loop, driven by the coordinator's decisions. The loop is the
// one docs/CLIENT_CONTRACT.md states for every client language, and the
// scenarios in tests/conformance/ hold it to that; in short:
//
//   Admit(n)   PROCEED(d)  sleep d, send attempt n, Report(n, outcome)
//              DEFER(f)    park f (below), then Admit(n) again
//              GIVE_UP     end kGaveUp
//   Report(n)  SUCCESS     end kSucceeded, whatever the answer
//   (failure)  PROCEED(d)  back off d (below), then Admit(m)
//              DEFER(f)    park f, then Admit(m)
//              GIVE_UP     end kGaveUp
//   where m is the decision's attempt: n+1, or n again when the failure
//   used up no attempt (an overload, the fleet's half-open probe).
//   DONE to anything but a success report, or an error status: end kError
//   (INVALID_ARGUMENT: the caller's bug; the message names the field).
//
// Waiting admission (options.waiting, on by default). When the answer came
// from a coordinator that holds waiting calls (ClientDecision::
// wait_supported), the loop does not sleep blindly:
//   * a backoff d is waited through the coordinator: Admit(n+1) with wait =
//     min(d, engine::kMaxWait); a PROCEED(ADMITTED) that comes back when
//     that wait ran out while the backoff is not over (d > 60 s) is followed
//     by another waiting Admit for the rest. Any other PROCEED (RELEASED:
//     the endpoint recovered; HALF_OPEN_PROBE; LAST_CHANCE) goes at once;
//   * a DEFER(f) is parked at the coordinator: Admit(n) with wait =
//     min(max(f, kMinPark), kMaxWait), again after each DEFER that comes
//     back, so the coordinator recalls the delivery the moment its endpoint
//     can take it.
// Otherwise (waiting off, a coordinator without it, a local decision) the
// loop sleeps the backoff or max(f, kMinPark), then asks without waiting.
// A waiting Admit that the local fallback answers (the coordinator went
// away) first sleeps the rest of the time the coordinator's answer owed
// (the backoff or the park), then acts on the fallback's answer.
//
// Parking ends the run kDeferred when the delivery would stay parked longer
// than options.park_limit since the first DEFER of the stretch (infinite by
// default: park in the loop until the coordinator lets it go or gives up;
// zero: every DEFER ends the run, to park it in the caller's queue and
// resume it later with Resume(next_attempt, first_attempt_time)). No
// attempt is consumed by a deferral.
//
// Cancellation (the Canceller, e.g. shutdown) is checked before every sleep,
// every Admit and every send, and interrupts any sleep or waiting Admit at
// once: the run ends kCancelled before the next attempt is sent. An attempt
// already running is let finish and reported (the coordinator's state must
// see it). A final answer (GIVE_UP, a success) is never turned into
// kCancelled.
//
// Each attempt is given options.attempt_timeout (Attempt::timeout, default
// kDefaultAttemptTimeout): the worker's HTTP client must give up by then and
// report TIMEOUT. The delivery's deadline bounds when attempts start (the
// coordinator answers GIVE_UP(DEADLINE) or a LAST_CHANCE before it), not
// how long one runs.
//
// Thread-safety: a RetryLoop is cheap and holds no per-run state, so one may
// be shared by threads when its options' callbacks are thread-safe; the
// Coordinator must be thread-safe (CoordinatorClient is).
#ifndef STAGGER_CLIENT_RETRY_LOOP_H_
#define STAGGER_CLIENT_RETRY_LOOP_H_

#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/wait.h"
#include "core/engine/clock.h"
#include "core/engine/decision.h"

namespace stagger::client {

// The contract's defaults (docs/CLIENT_CONTRACT.md, "Defaults").
inline constexpr absl::Duration kDefaultAttemptTimeout = absl::Seconds(30);
// A DEFER is never waited or slept for less (a coordinator answering
// DEFER(0) must not make a hot loop).
inline constexpr absl::Duration kMinPark = absl::Milliseconds(10);

// What one attempt produced. retry_after: the endpoint's Retry-After, if it
// sent one (see ParseRetryAfter); ratelimit_reset: its RateLimit-Reset (see
// ParseRateLimitReset); each within [0, engine::kMaxRetryAfter]. Named
// fields, each optional but the outcome: more of what the endpoint said
// fit here without changing callers.
struct AttemptResult {
  engine::Outcome outcome = engine::Outcome::kSuccess;
  std::optional<absl::Duration> retry_after;
  std::optional<absl::Duration> ratelimit_reset;
};

// The attempt to send: its number (>= 1) and how long it may take (the
// worker's HTTP client gives up by then and reports TIMEOUT).
struct Attempt {
  int number = 1;
  absl::Duration timeout = kDefaultAttemptTimeout;
};

// Sends one attempt and says what happened. A send that gets no answer
// reports it as an outcome (OutcomeFromHttpStatus(0): RETRYABLE_FAILURE; a
// timeout: TIMEOUT); C++ sends do not throw.
using AttemptFn = std::function<AttemptResult(const Attempt& attempt)>;

// Blocks for `d` unless `c` is cancelled; true if the whole wait elapsed.
using WaitFn = std::function<bool(absl::Duration d, const Canceller& c)>;

// One decision as the loop received it (for logging / example output).
struct DecisionEvent {
  Call call = Call::kAdmit;
  int attempt = 0;  // the attempt the call was about (Report: the finished one)
  std::optional<engine::Outcome> outcome;  // Report only
  absl::Duration wait = absl::ZeroDuration();  // a waiting Admit's wait
  ClientDecision decision;
};

struct RetryLoopOptions {
  // Caller's deadline for the whole delivery, sent with every call.
  absl::Time deadline = absl::InfiniteFuture();
  // When the delivery's first attempt started. InfinitePast: the loop sets
  // it to the time it sends attempt 1 (if it does).
  absl::Time first_attempt_time = absl::InfinitePast();
  // The attempt to admit first: 1 for a new delivery, result.next_attempt of
  // the previous run for a parked one. >= 1.
  int first_attempt = 1;
  // Attempt::timeout of every attempt. > 0.
  absl::Duration attempt_timeout = kDefaultAttemptTimeout;
  // Waiting admission (see the top).
  bool waiting = true;
  // How long a run may stay parked before it ends kDeferred (see the top):
  // InfiniteDuration (default) parks in the loop; zero ends at every DEFER.
  absl::Duration park_limit = absl::InfiniteDuration();
  // How to wait. Default: WaitFor (real time, cancellable). Tests inject a
  // fake that advances a fake clock.
  WaitFn wait;
  // Time source for first_attempt_time and the loop's own bookkeeping
  // (owed backoffs, the park limit). Null: engine::RealClock.
  const engine::Clock* clock = nullptr;
  // Called with every decision received, before acting on it. Optional.
  std::function<void(const DecisionEvent&)> on_decision;
};

enum class LoopEnd : uint8_t {
  kSucceeded = 1,  // an attempt succeeded
  kGaveUp = 2,     // GIVE_UP: dead-letter; last_decision.reason says why
  kDeferred = 3,   // parked past park_limit: park until last_decision's time
  kCancelled = 4,  // the Canceller fired
  kError = 5,      // an error status, or a broken answer (see `error`)
};
const char* LoopEndName(LoopEnd e);  // "SUCCEEDED", ...

struct LoopResult {
  LoopEnd end = LoopEnd::kError;
  // Attempts sent (the callback ran) during this run.
  int attempts_made = 0;
  // The attempt to send next: one more than the last attempt sent, or the
  // run's first attempt if none was (resume a kDeferred or kCancelled run
  // here).
  int next_attempt = 1;
  // The last decision received (none for kError or kCancelled before any).
  std::optional<ClientDecision> last_decision;
  // kError: why. kSucceeded: an error the success's Report got, if any
  // (the delivery is done; log it).
  absl::Status error;
  absl::Time first_attempt_time = absl::InfinitePast();  // to resume with
};

class RetryLoop {
 public:
  // `coordinator` and `canceller` must outlive the loop.
  RetryLoop(Coordinator* coordinator, const Canceller* canceller,
            RetryLoopOptions options = {});

  // Runs one delivery to `endpoint` until it succeeds, gives up, is
  // deferred, cancelled or errs.
  LoopResult Run(absl::string_view endpoint, const AttemptFn& attempt) const;

  // Same, overriding the options' resume point for a parked delivery.
  LoopResult Resume(absl::string_view endpoint, int next_attempt,
                    absl::Time first_attempt_time,
                    const AttemptFn& attempt) const;

 private:
  class Delivery;  // one run's state (retry_loop.cc)
  Coordinator* coordinator_;
  const Canceller* canceller_;
  RetryLoopOptions options_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_RETRY_LOOP_H_
