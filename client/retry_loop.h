// RetryLoop: one delivery's admit -> (wait) -> attempt -> report -> (wait)
// -> admit ... loop, driven by the coordinator's decisions.
//
//   Admit(n) -> PROCEED(delay)  wait delay, send attempt n, Report(n, outcome)
//   Report   -> DONE            end: kSucceeded
//            -> PROCEED(delay)  wait delay, Admit(m), ... where m is the
//                               decision's attempt: n+1, or n again when
//                               the failure used up no attempt (an
//                               overload, the fleet's half-open probe)
//            -> GIVE_UP         end: kGaveUp (dead-letter it)
//            -> DEFER(until)    end: kDeferred
//   Admit    -> DEFER / GIVE_UP end as above
//
// A DEFER ends the run instead of sleeping through it: the caller parks the
// delivery (e.g. as its queue's redelivery delay, result.last_decision
// .defer_for) and later calls Run again with options.first_attempt =
// result.next_attempt. No attempt is consumed by a deferral.
//
// Waiting admission (options.waiting, on by default). When the coordinator
// that answered holds waiting calls (ClientDecision::wait_supported), the
// loop does not sleep blindly:
//   * a PROCEED after a failure (a backoff of d, a Retry-After, a last
//     chance) is followed at once by Admit(n+1) with wait = d (after
//     sleeping what exceeds engine::kMaxWait): the coordinator answers at d,
//     or earlier only if the endpoint showed it recovered;
//   * with options.park_in_loop (default), a DEFER is followed at once by
//     Admit(n) with wait = min(defer_for, engine::kMaxWait), again after
//     each DEFER that comes back: the delivery is held by the coordinator
//     and recalled the moment its endpoint can take it, instead of ending
//     the run.
// A waiting Admit is cancelled with the run (Coordinator::AdmitWaiting). A
// coordinator without it (wait_supported false) gets the loop above.
//
// Cancellation (the Canceller, e.g. shutdown) interrupts any wait at once and
// ends the run with kCancelled before the next attempt is sent; an attempt
// already running is let finish and reported (the coordinator's state must
// see it), then the run ends. A coordinator error status (INVALID_ARGUMENT:
// the caller's bug) ends the run with kError.
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

// What one attempt produced. retry_after: the endpoint's Retry-After, if it
// sent one (see ParseRetryAfter); ratelimit_reset: its RateLimit-Reset (see
// ParseRateLimitReset); each within [0, engine::kMaxRetryAfter].
struct AttemptResult {
  engine::Outcome outcome = engine::Outcome::kSuccess;
  std::optional<absl::Duration> retry_after;
  std::optional<absl::Duration> ratelimit_reset;
};

// Sends attempt number `attempt` (>= 1) and says what happened.
using AttemptFn = std::function<AttemptResult(int attempt)>;

// Blocks for `d` unless `c` is cancelled; true if the whole wait elapsed.
using WaitFn = std::function<bool(absl::Duration d, const Canceller& c)>;

// One decision as the loop received it (for logging / example output).
struct DecisionEvent {
  Call call = Call::kAdmit;
  int attempt = 0;  // the attempt the call was about (Report: the finished one)
  std::optional<engine::Outcome> outcome;  // Report only
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
  // How to wait. Default: WaitFor (real time, cancellable). Tests inject a
  // fake that advances a fake clock.
  WaitFn wait;
  // Time source for first_attempt_time. Null: engine::RealClock.
  const engine::Clock* clock = nullptr;
  // Called with every decision received, before acting on it. Optional.
  std::function<void(const DecisionEvent&)> on_decision;
  // Waiting admission (see the top): for backoffs, and with park_in_loop
  // for DEFERs too.
  bool waiting = true;
  bool park_in_loop = true;
};

enum class LoopEnd : uint8_t {
  kSucceeded = 1,  // an attempt succeeded (Report -> DONE)
  kGaveUp = 2,     // GIVE_UP: dead-letter; last_decision.reason says why
  kDeferred = 3,   // DEFER: park until last_decision.defer_until
  kCancelled = 4,  // the Canceller fired
  kError = 5,      // the coordinator call returned an error (see `error`)
};
const char* LoopEndName(LoopEnd e);  // "SUCCEEDED", ...

struct LoopResult {
  LoopEnd end = LoopEnd::kError;
  // Attempts sent (the callback ran) during this run.
  int attempts_made = 0;
  // The attempt to admit when the delivery resumes (kDeferred, kCancelled).
  int next_attempt = 1;
  // The decision that ended the run (none for kError, or kCancelled before
  // any decision).
  std::optional<ClientDecision> last_decision;
  absl::Status error;  // kError only
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
