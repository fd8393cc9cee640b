#include "client/retry_loop.h"

#include <utility>

namespace stagger::client {

const char* LoopEndName(LoopEnd e) {
  switch (e) {
    case LoopEnd::kSucceeded: return "SUCCEEDED";
    case LoopEnd::kGaveUp: return "GAVE_UP";
    case LoopEnd::kDeferred: return "DEFERRED";
    case LoopEnd::kCancelled: return "CANCELLED";
    case LoopEnd::kError: return "ERROR";
  }
  return "UNKNOWN";
}

RetryLoop::RetryLoop(Coordinator* coordinator, const Canceller* canceller,
                     RetryLoopOptions options)
    : coordinator_(coordinator),
      canceller_(canceller),
      options_(std::move(options)) {
  if (!options_.wait) options_.wait = &WaitFor;
  if (options_.clock == nullptr) options_.clock = engine::RealClock::Instance();
}

LoopResult RetryLoop::Run(absl::string_view endpoint,
                          const AttemptFn& attempt) const {
  return Resume(endpoint, options_.first_attempt, options_.first_attempt_time,
                attempt);
}

LoopResult RetryLoop::Resume(absl::string_view endpoint, int next_attempt,
                             absl::Time first_attempt_time,
                             const AttemptFn& send) const {
  LoopResult r;
  r.first_attempt_time = first_attempt_time;
  int attempt = next_attempt;  // the attempt the current decision is about
  r.next_attempt = attempt;

  // Invariant at the top of the loop: `d` answers `call` about `attempt`
  // (Admit: may attempt be sent; Report: attempt finished with `outcome`).
  Call call = Call::kAdmit;
  std::optional<engine::Outcome> outcome;
  uint64_t admission = 0;  // the token of the Admit that let the attempt go
  // Every call carries the delivery's deadline and first attempt's time.
  const auto admit = [&](int n) {
    AdmitRequest in;
    in.endpoint = endpoint;
    in.attempt = n;
    in.deadline = options_.deadline;
    in.first_attempt_time = r.first_attempt_time;
    return coordinator_->Admit(in);
  };
  const auto report = [&](int n, const AttemptResult& result) {
    ReportRequest in;
    in.endpoint = endpoint;
    in.attempt = n;
    in.outcome = result.outcome;
    in.retry_after = result.retry_after;
    in.admission = admission;
    in.deadline = options_.deadline;
    in.first_attempt_time = r.first_attempt_time;
    return coordinator_->Report(in);
  };
  absl::StatusOr<ClientDecision> d = admit(attempt);
  while (true) {
    if (!d.ok()) {
      r.end = LoopEnd::kError;
      r.error = d.status();
      return r;
    }
    if (options_.on_decision) {
      options_.on_decision(DecisionEvent{call, attempt, outcome, *d});
    }
    r.last_decision = *d;

    if (call == Call::kReport && outcome == engine::Outcome::kSuccess) {
      // The attempt succeeded: whatever the answer (DONE), nothing is left
      // to send.
      r.end = LoopEnd::kSucceeded;
      return r;
    }
    // The attempt the next send would be.
    const int upcoming = call == Call::kAdmit ? attempt : attempt + 1;
    switch (d->verdict) {
      case engine::Verdict::kGiveUp:
        r.end = LoopEnd::kGaveUp;
        r.next_attempt = upcoming;
        return r;
      case engine::Verdict::kDefer:
        r.end = LoopEnd::kDeferred;
        r.next_attempt = upcoming;
        return r;
      case engine::Verdict::kDone:  // to an Admit or a failure: broken peer
        r.end = LoopEnd::kError;
        r.error = absl::InternalError("coordinator answered DONE to a call "
                                      "that was not a success report");
        return r;
      case engine::Verdict::kProceed:
        break;
    }

    r.next_attempt = upcoming;
    if (!options_.wait(d->delay, *canceller_)) {
      r.end = LoopEnd::kCancelled;
      return r;
    }
    if (call == Call::kReport) {
      // PROCEED after a failure: the delay is served; ask for the retry.
      attempt = upcoming;
      call = Call::kAdmit;
      outcome.reset();
      d = admit(attempt);
      continue;
    }
    // PROCEED to an Admit: send it.
    if (attempt == 1 && r.first_attempt_time == absl::InfinitePast()) {
      r.first_attempt_time = options_.clock->Now();
    }
    admission = d->admission;
    const AttemptResult result = send(attempt);
    ++r.attempts_made;
    call = Call::kReport;
    outcome = result.outcome;
    d = report(attempt, result);
  }
}

}  // namespace stagger::client
