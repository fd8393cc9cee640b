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

// One delivery's run (docs/CLIENT_CONTRACT.md, "The loop"). Invariant
// between steps: `d_` answers `call_` about `attempt_` (Admit: may attempt_
// be sent; Report: attempt_ finished with `outcome_`), asked at `asked_at_`
// with `wait_` (a waiting Admit: wait_ > 0, for a backoff or a park).
class RetryLoop::Delivery {
 public:
  Delivery(const RetryLoop& loop, absl::string_view endpoint, int next_attempt,
           absl::Time first_attempt_time)
      : loop_(loop), o_(loop.options_), endpoint_(endpoint) {
    r_.first_attempt_time = first_attempt_time;
    r_.next_attempt = next_attempt;
  }

  LoopResult Go(const AttemptFn& send) {
    bool ended = Ask(r_.next_attempt, WaitKind::kNone, absl::ZeroDuration());
    while (!ended) ended = Step(send);
    return std::move(r_);
  }

 private:
  enum class WaitKind : uint8_t { kNone, kBackoff, kPark };

  // Acts on `d_`; true when the run has ended (r_ says how).
  bool Step(const AttemptFn& send) {
    if (d_.ok()) {
      if (o_.on_decision) {
        o_.on_decision(DecisionEvent{call_, attempt_, outcome_, wait_, *d_});
      }
      r_.last_decision = *d_;
    }
    // An attempt succeeded: whatever the answer, nothing is left to do.
    if (call_ == Call::kReport && outcome_ == engine::Outcome::kSuccess) {
      r_.error = d_.status();
      return End(LoopEnd::kSucceeded);
    }
    if (!d_.ok()) {
      if (absl::IsCancelled(d_.status()) && Cancelled()) {
        return End(LoopEnd::kCancelled);
      }
      return End(LoopEnd::kError, d_.status());
    }
    // The attempt the next send would be: after a failure Report, the one
    // the decision names (the same one when the failure used up none).
    // Only a run that goes on takes it as its next attempt; an end keeps
    // the count of attempts made. The local fallback is held to the
    // contract's subset, which always counts the attempt
    // (docs/CLIENT_CONTRACT.md).
    const bool named = d_->attempt > 0 &&
                       d_->source == DecisionSource::kCoordinator;
    const int upcoming = call_ == Call::kAdmit ? attempt_
                         : named               ? d_->attempt
                                               : attempt_ + 1;
    switch (d_->verdict) {
      case engine::Verdict::kGiveUp:
        return End(LoopEnd::kGaveUp);
      case engine::Verdict::kDone:  // to an Admit or a failure: broken peer
        return End(LoopEnd::kError,
                   absl::InternalError("coordinator answered DONE to a call "
                                       "that was not a success report"));
      case engine::Verdict::kDefer:
        r_.next_attempt = upcoming;
        return Park(upcoming);
      case engine::Verdict::kProceed:
        break;
    }
    r_.next_attempt = upcoming;
    parked_since_ = absl::InfiniteFuture();  // a PROCEED ends a stretch
    if (call_ == Call::kReport) return Backoff(upcoming);
    return Proceed(send);
  }

  // PROCEED(delay) to a failure Report: wait the backoff (at the
  // coordinator when it holds waiting calls), then Admit(upcoming).
  bool Backoff(int upcoming) {
    const absl::Duration d = d_->delay;
    not_before_ = Now() + d;
    if (Waits() && d > absl::ZeroDuration()) {
      return Ask(upcoming, WaitKind::kBackoff, std::min(d, engine::kMaxWait));
    }
    if (!Sleep(d)) return End(LoopEnd::kCancelled);
    return Ask(upcoming, WaitKind::kNone, absl::ZeroDuration());
  }

  // DEFER: park (at the coordinator when it holds waiting calls), then
  // Admit(upcoming) again; or end the run past the park limit.
  bool Park(int upcoming) {
    if (!SleepOwed()) return End(LoopEnd::kCancelled);
    const absl::Time now = Now();
    if (parked_since_ == absl::InfiniteFuture()) parked_since_ = now;
    const absl::Duration park = std::max(d_->defer_for, kMinPark);
    if (now + park - parked_since_ > o_.park_limit) {
      return End(LoopEnd::kDeferred);
    }
    not_before_ = now + park;
    if (Waits()) {
      return Ask(upcoming, WaitKind::kPark, std::min(park, engine::kMaxWait));
    }
    if (!Sleep(park)) return End(LoopEnd::kCancelled);
    return Ask(upcoming, WaitKind::kNone, absl::ZeroDuration());
  }

  // PROCEED(delay) to an Admit: the delay, the attempt, its Report. A
  // waiting backoff's ADMITTED at the end of its wait, with backoff still
  // owed (over kMaxWait), waits again for the rest instead.
  bool Proceed(const AttemptFn& send) {
    if (!SleepOwed()) return End(LoopEnd::kCancelled);
    const absl::Time now = Now();
    if (wait_kind_ == WaitKind::kBackoff &&
        d_->source == DecisionSource::kCoordinator &&
        d_->reason == engine::Reason::kAdmitted && now >= asked_at_ + wait_ &&
        not_before_ > now) {
      return Ask(attempt_, WaitKind::kBackoff,
                 std::min(not_before_ - now, engine::kMaxWait));
    }
    if (!Sleep(d_->delay) || Cancelled()) return End(LoopEnd::kCancelled);
    if (attempt_ == 1 && r_.first_attempt_time == absl::InfinitePast()) {
      r_.first_attempt_time = Now();
    }
    const uint64_t admission = d_->admission;
    const AttemptResult result = send(Attempt{attempt_, o_.attempt_timeout});
    ++r_.attempts_made;
    r_.next_attempt = attempt_ + 1;
    call_ = Call::kReport;
    outcome_ = result.outcome;
    wait_ = absl::ZeroDuration();
    wait_kind_ = WaitKind::kNone;
    d_ = Report(result, admission);
    return false;
  }

  // The local fallback answered a waiting Admit (the coordinator went
  // away): first the rest of what the coordinator's answer owed.
  bool SleepOwed() {
    if (wait_ <= absl::ZeroDuration() ||
        d_->source != DecisionSource::kLocalFallback) {
      return true;
    }
    return Sleep(not_before_ - Now());
  }

  // The answer came from a coordinator that holds waiting calls.
  bool Waits() const {
    return o_.waiting && d_->wait_supported &&
           d_->source == DecisionSource::kCoordinator;
  }

  // Admit(n), waiting `wait` when it is > 0; true if cancelled first.
  bool Ask(int n, WaitKind kind, absl::Duration wait) {
    if (Cancelled()) return End(LoopEnd::kCancelled);
    attempt_ = n;
    call_ = Call::kAdmit;
    outcome_.reset();
    wait_ = wait;
    wait_kind_ = kind;
    asked_at_ = Now();
    AdmitRequest in;
    in.endpoint = endpoint_;
    in.attempt = n;
    in.deadline = o_.deadline;
    in.first_attempt_time = r_.first_attempt_time;
    in.wait = wait;
    d_ = wait > absl::ZeroDuration()
             ? loop_.coordinator_->AdmitWaiting(in, loop_.canceller_)
             : loop_.coordinator_->Admit(in);
    return false;
  }

  absl::StatusOr<ClientDecision> Report(const AttemptResult& result,
                                        uint64_t admission) {
    ReportRequest in;
    in.endpoint = endpoint_;
    in.attempt = attempt_;
    in.outcome = result.outcome;
    in.retry_after = result.retry_after;
    in.ratelimit_reset = result.ratelimit_reset;
    in.deadline = o_.deadline;
    in.first_attempt_time = r_.first_attempt_time;
    in.admission = admission;
    return loop_.coordinator_->Report(in);
  }

  // Sleeps `d` (nothing when <= 0); false if cancelled before or during.
  bool Sleep(absl::Duration d) {
    if (Cancelled()) return false;
    if (d <= absl::ZeroDuration()) return true;
    return o_.wait(d, *loop_.canceller_);
  }
  bool Cancelled() const { return loop_.canceller_->cancelled(); }
  absl::Time Now() const { return o_.clock->Now(); }

  bool End(LoopEnd end, absl::Status error = absl::OkStatus()) {
    r_.end = end;
    if (!error.ok()) r_.error = std::move(error);
    return true;
  }

  const RetryLoop& loop_;
  const RetryLoopOptions& o_;
  const absl::string_view endpoint_;
  int attempt_ = 1;
  Call call_ = Call::kAdmit;
  std::optional<engine::Outcome> outcome_;
  absl::StatusOr<ClientDecision> d_;
  absl::Duration wait_ = absl::ZeroDuration();
  WaitKind wait_kind_ = WaitKind::kNone;
  absl::Time asked_at_ = absl::InfinitePast();
  // When the current backoff or park ends (what the coordinator owed).
  absl::Time not_before_ = absl::InfinitePast();
  // The first DEFER of the current stretch; InfiniteFuture: not parked.
  absl::Time parked_since_ = absl::InfiniteFuture();
  LoopResult r_;
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
