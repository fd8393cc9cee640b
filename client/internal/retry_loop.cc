#include "client/retry_loop.h"

#include <algorithm>
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

// One delivery's run. Invariant between steps: `d` answers `call` about
// `attempt` (Admit: may attempt be sent; Report: attempt finished with
// `outcome`).
class RetryLoop::Delivery {
 public:
  Delivery(const RetryLoop& loop, absl::string_view endpoint, int next_attempt,
      absl::Time first_attempt_time)
      : loop_(loop), endpoint_(endpoint), attempt_(next_attempt) {
    r_.first_attempt_time = first_attempt_time;
    r_.next_attempt = next_attempt;
  }

  LoopResult Go(const AttemptFn& send) {
    d_ = Admit(attempt_, absl::ZeroDuration());
    while (!Step(send)) {
    }
    return std::move(r_);
  }

 private:
  // Acts on `d_`; true when the run has ended (r_ says how).
  bool Step(const AttemptFn& send) {
    if (!d_.ok()) return End(LoopEnd::kError, d_.status());
    const RetryLoopOptions& o = loop_.options_;
    if (o.on_decision) o.on_decision(DecisionEvent{call_, attempt_, outcome_, *d_});
    r_.last_decision = *d_;
    // An attempt succeeded: whatever the answer (DONE), nothing is left.
    if (call_ == Call::kReport && outcome_ == engine::Outcome::kSuccess) {
      return End(LoopEnd::kSucceeded);
    }
    // The attempt the next send would be: after a failure Report, the one
    // the decision names (the same one when the failure used up none).
    const int upcoming = call_ == Call::kAdmit ? attempt_
                         : d_->attempt > 0     ? d_->attempt
                                               : attempt_ + 1;
    r_.next_attempt = upcoming;
    switch (d_->verdict) {
      case engine::Verdict::kGiveUp:
        return End(LoopEnd::kGaveUp);
      case engine::Verdict::kDefer:
        return Deferred(upcoming);
      case engine::Verdict::kDone:  // to an Admit or a failure: broken peer
        return End(LoopEnd::kError,
                   absl::InternalError("coordinator answered DONE to a call "
                                       "that was not a success report"));
      case engine::Verdict::kProceed:
        break;
    }
    if (call_ == Call::kReport) return Retry(upcoming);
    return Send(send);
  }

  // PROCEED after a failure: the delay, then Admit(upcoming) (waiting out
  // the delay there when the coordinator holds waiting calls).
  bool Retry(int upcoming) {
    absl::Duration wait = absl::ZeroDuration();
    absl::Duration sleep = d_->delay;
    if (Waits()) {
      wait = std::min(d_->delay, engine::kMaxWait);
      sleep = d_->delay - wait;
    }
    if (!loop_.options_.wait(sleep, *loop_.canceller_)) {
      return End(LoopEnd::kCancelled);
    }
    attempt_ = upcoming;
    call_ = Call::kAdmit;
    outcome_.reset();
    d_ = Admit(attempt_, wait);
    return false;
  }

  // DEFER: the run ends (the caller parks the delivery), or the delivery
  // waits here, held by the coordinator, with park_in_loop.
  bool Deferred(int upcoming) {
    if (!Waits() || !loop_.options_.park_in_loop) {
      return End(LoopEnd::kDeferred);
    }
    if (loop_.canceller_->cancelled()) return End(LoopEnd::kCancelled);
    attempt_ = upcoming;
    call_ = Call::kAdmit;
    outcome_.reset();
    d_ = Admit(attempt_, std::clamp(d_->defer_for, absl::Nanoseconds(1),
                                    engine::kMaxWait));
    return false;
  }

  // PROCEED to an Admit: the delay, the attempt, its Report.
  bool Send(const AttemptFn& send) {
    if (!loop_.options_.wait(d_->delay, *loop_.canceller_)) {
      return End(LoopEnd::kCancelled);
    }
    if (attempt_ == 1 && r_.first_attempt_time == absl::InfinitePast()) {
      r_.first_attempt_time = loop_.options_.clock->Now();
    }
    const uint64_t admission = d_->admission;
    const AttemptResult result = send(attempt_);
    ++r_.attempts_made;
    call_ = Call::kReport;
    outcome_ = result.outcome;
    d_ = Report(attempt_, result, admission);
    return false;
  }

  bool Waits() const {
    return loop_.options_.waiting && d_->wait_supported &&
           d_->source == DecisionSource::kCoordinator;
  }

  absl::StatusOr<ClientDecision> Admit(int n, absl::Duration wait) {
    AdmitRequest in;
    in.endpoint = endpoint_;
    in.attempt = n;
    in.deadline = loop_.options_.deadline;
    in.first_attempt_time = r_.first_attempt_time;
    in.wait = wait;
    if (wait <= absl::ZeroDuration()) return loop_.coordinator_->Admit(in);
    absl::StatusOr<ClientDecision> d =
        loop_.coordinator_->AdmitWaiting(in, loop_.canceller_);
    if (absl::IsCancelled(d.status())) End(LoopEnd::kCancelled);
    return d;
  }

  absl::StatusOr<ClientDecision> Report(int n, const AttemptResult& result,
                                        uint64_t admission) {
    ReportRequest in;
    in.endpoint = endpoint_;
    in.attempt = n;
    in.outcome = result.outcome;
    in.retry_after = result.retry_after;
    in.ratelimit_reset = result.ratelimit_reset;
    in.deadline = loop_.options_.deadline;
    in.first_attempt_time = r_.first_attempt_time;
    in.admission = admission;
    return loop_.coordinator_->Report(in);
  }

  bool End(LoopEnd end, absl::Status error = absl::OkStatus()) {
    if (ended_) return true;  // a cancelled wait already said how
    ended_ = true;
    r_.end = end;
    r_.error = std::move(error);
    return true;
  }

  const RetryLoop& loop_;
  const absl::string_view endpoint_;
  int attempt_;
  Call call_ = Call::kAdmit;
  std::optional<engine::Outcome> outcome_;
  absl::StatusOr<ClientDecision> d_;
  LoopResult r_;
  bool ended_ = false;
};

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
  return Delivery(*this, endpoint, next_attempt, first_attempt_time).Go(send);
}

}  // namespace stagger::client
