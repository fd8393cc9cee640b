#include "core/engine/decision_path.h"

#include <algorithm>
#include <memory>

#include "core/engine/admission.h"
#include "core/engine/backoff.h"
#include "core/engine/endpoint_table.h"

namespace stagger::engine {
namespace {

int64_t Nanos(absl::Time t) { return absl::ToUnixNanos(t); }
absl::Time FromNanos(int64_t ns) { return absl::FromUnixNanos(ns); }

void AddTransition(DecisionContext& c, Decision* d,
                   const CircuitBreaker::MaybeTransition& t) {
  if (!t.has_value()) return;
  if (d->num_transitions < 2) d->transitions[d->num_transitions++] = *t;
  if (c.table != nullptr) c.table->CountTransition(*t);
}

// The gate is closed while the breaker is not CLOSED or the endpoint's
// Retry-After window runs: failures then are the outage's, and parked
// deliveries wait for the gate rather than for a slot.
bool GateClosed(const EndpointState& st, absl::Time now) {
  return st.breaker.state() != BreakerState::kClosed ||
         st.retry_after_until_ns > Nanos(now);
}

// Tells the capacity estimator and the release queue whether the gate is
// open now (allocating the release side when it first closes).
void SyncGate(DecisionContext& c) {
  EndpointState& st = c.st;
  if (GateClosed(st, c.now)) {
    if (st.release == nullptr) st.release = std::make_unique<EndpointRelease>();
    st.release->capacity.OnGateClosed(c.now, st.served.PerSecond(c.now));
    st.release->pacer.OnGateClosed(c.now);
  } else if (st.release != nullptr) {
    st.release->capacity.OnGateOpened(c.p.deferral, c.now);
    st.release->pacer.OnGateOpened(c.now);
  }
}

// True while parked deliveries are coming back at the learned pace.
bool Releasing(const EndpointState& st, absl::Time now) {
  return st.release != nullptr && st.release->pacer.Releasing(now);
}

void Apply(const Answer& a, Decision* d) {
  d->verdict = a.verdict;
  d->reason = a.reason;
  d->delay = a.delay;
  d->defer_until = a.defer_until;
}

Decision Begin(const DecisionContext& c, int attempt) {
  Decision d;
  d.attempt = attempt;
  d.untracked = c.table == nullptr;
  return d;
}

Answer AdmitGates(DecisionContext& c, int attempt, Decision* d) {
  const bool retry = attempt > 1;
  if (GateAnswer a = Disabled(c)) return *a;
  if (GateAnswer a = Paused(c)) return *a;
  if (GateAnswer a = AttemptLimit(c, attempt)) return *a;
  if (GateAnswer a = DeadlinePassed(c)) return *a;
  RefreshBreaker(c, d);
  if (GateAnswer a = BreakerOpen(c)) return *a;
  if (retry) {
    if (GateAnswer a = RetryAfterWindow(c)) return *a;
    if (GateAnswer a = BudgetEmpty(c)) return *a;
  }
  if (GateAnswer a = HalfOpenBusy(c)) return *a;
  if (GateAnswer a = HalfOpenProbe(c)) return *a;
  if (GateAnswer a = ReleasePace(c)) return *a;
  if (retry) return Answer::Proceed(Reason::kAdmitted, absl::ZeroDuration());
  return Answer::Proceed(Reason::kInitialJitter,
                         UniformDuration(c.rng, c.p.backoff.initial_jitter));
}

Answer FailureGates(DecisionContext& c, int next_attempt, bool overload) {
  if (GateAnswer a = AttemptLimit(c, next_attempt)) return *a;
  if (GateAnswer a = BreakerOpen(c)) return *a;
  if (GateAnswer a = HalfOpenBusy(c)) return *a;
  if (GateAnswer a = Overload(c, overload)) return *a;
  if (GateAnswer a = BudgetEmpty(c)) return *a;
  return RetryDelay(c, next_attempt - 1);
}

// Remembers the endpoint's Retry-After for the whole fleet: it is
// information even if this delivery goes no further.
void RememberRetryAfter(DecisionContext& c, absl::Duration ra, Decision* d) {
  d->retry_after_seen = true;
  if (ra > c.p.backoff.retry_after_max) {
    ra = c.p.backoff.retry_after_max;
    d->retry_after_clamped = true;
  }
  c.st.retry_after_until_ns =
      std::max(c.st.retry_after_until_ns, Nanos(c.now + ra));
}


// Admit's bookkeeping for a call that goes now. First attempts fund the
// budget when they go; a retry spends from it only when it fails (Report),
// so a retry that succeeds costs nothing. The admission token says whether
// it is a probe.
void Admitted(DecisionContext& c, const AdmitInput& in, Decision* d) {
  if (in.attempt == 1) c.st.budget.RecordFirstAttempt(c.p.budget, c.now);
  d->admission = d->reason == Reason::kHalfOpenProbe
                     ? ProbeAdmission(c.token_salt, c.st.breaker.generation())
                     : kCoordinatorAdmission;
}

WaitOutcome Hold(absl::Time recheck, bool gated = true) {
  return WaitOutcome{std::nullopt, recheck, gated};
}

}  // namespace

absl::Time EffectiveDeadline(const PolicyParams& p, absl::Time deadline,
                             absl::Time first_attempt) {
  const absl::Duration horizon = p.backoff.horizon;
  if (horizon > absl::ZeroDuration() &&
      first_attempt != absl::InfinitePast()) {
    deadline = std::min(deadline, first_attempt + horizon);
  }
  return deadline;
}

Decision DecideAdmit(DecisionContext& c, const AdmitInput& in) {
  Decision d = Begin(c, in.attempt);
  Apply(AdmitGates(c, in.attempt, &d), &d);
  if (d.verdict == Verdict::kProceed) Admitted(c, in, &d);
  return d;
}

absl::Time LastEvidence(const EndpointState& st, absl::Time now) {
  int64_t evidence = st.last_success_ns;
  if (st.retry_after_until_ns <= Nanos(now)) {
    evidence = std::max(evidence, st.retry_after_until_ns);
  }
  return FromNanos(evidence);
}

WaitOutcome DecideWaiting(DecisionContext& c, const AdmitInput& in,
                          WaitState& w, WaitStep step) {
  if (step == WaitStep::kExpire || c.now >= w.until) {
    return WaitOutcome{DecideAdmit(c, in)};
  }
  const bool recheck = step == WaitStep::kRecheck;
  if (recheck && w.backoff && LastEvidence(c.st, c.now) <= w.since) {
    // No sign of recovery yet: its own backoff stands.
    return Hold(w.until, /*gated=*/false);
  }
  c.waiting = true;
  c.recheck = recheck;
  Decision d = Begin(c, in.attempt);
  const Answer a = AdmitGates(c, in.attempt, &d);
  Apply(a, &d);
  if (a.verdict == Verdict::kDefer) {
    // When the reason may end: Park's target, else the answer's own time
    // (a pause's end, a last-chance landing).
    const absl::Time next = c.wait_target != absl::InfiniteFuture()
                                ? c.wait_target
                                : a.defer_until;
    return Hold(std::min(next, w.until));
  }
  if (a.verdict == Verdict::kProceed && !recheck) {
    const bool now = in.attempt == 1 || a.reason == Reason::kHalfOpenProbe ||
                     a.reason == Reason::kLastChance ||
                     Releasing(c.st, c.now);
    if (!now) {
      w.backoff = true;
      return Hold(w.until, /*gated=*/false);
    }
  }
  if (a.verdict == Verdict::kProceed) {
    if (recheck && (a.reason == Reason::kAdmitted ||
                    a.reason == Reason::kInitialJitter)) {
      d.reason = Reason::kReleased;
      d.delay = absl::ZeroDuration();
    }
    Admitted(c, in, &d);
  }
  return WaitOutcome{d};
}

Decision DecideReport(DecisionContext& c, const ReportInput& in) {
  Decision d = Begin(c, in.attempt);
  if (in.outcome != Outcome::kSuccess) {
    GateAnswer a = Disabled(c);
    if (!a) a = Paused(c);
    if (a) {
      d.attempt = in.attempt + 1;
      Apply(*a, &d);
      return d;
    }
  }
  RefreshBreaker(c, &d);
  switch (in.outcome) {
    case Outcome::kSuccess:
      LearnFromAnswer(c, in.admission, &d);
      c.st.previous_delay_ns = 0;  // reset on success only, never by time
      Apply(Answer::Done(Reason::kSucceeded), &d);
      return d;
    case Outcome::kNotRetryable:
      // The endpoint answered: it is up, whatever it thought of us.
      LearnFromAnswer(c, in.admission, &d);
      Apply(Answer::GiveUp(Reason::kNotRetryable), &d);
      return d;
    case Outcome::kRetryableFailure:
    case Outcome::kTimeout:
    case Outcome::kRateLimited:
      break;
  }
  const bool overload = LearnFromFailure(c, in, &d);
  d.attempt = in.attempt + 1;
  Apply(FailureGates(c, d.attempt, overload), &d);
  return d;
}

void ApplyForcedBreaker(DecisionContext& c,
                        const CircuitBreaker::MaybeTransition& t) {
  Decision unused;
  AddTransition(c, &unused, t);
  SyncGate(c);
}

// ---- The gates --------------------------------------------------------

GateAnswer Disabled(const DecisionContext& c) {
  if (!c.st.disabled) return std::nullopt;
  return Answer::GiveUp(Reason::kEndpointDisabled);
}

GateAnswer Paused(DecisionContext& c) {
  if (c.paused_until <= c.now) return std::nullopt;
  if (c.waiting) c.wait_target = c.paused_until;
  return Answer::Defer(Reason::kPaused, c.paused_until + UniformDuration(
                                            c.rng, c.p.deferral.spread));
}

GateAnswer AttemptLimit(const DecisionContext& c, int attempt) {
  if (attempt <= c.p.backoff.max_attempts) return std::nullopt;
  return Answer::GiveUp(Reason::kAttemptsExhausted);
}

GateAnswer DeadlinePassed(const DecisionContext& c) {
  if (c.now <= c.deadline) return std::nullopt;
  return Answer::GiveUp(Reason::kDeadline);
}

GateAnswer BreakerOpen(DecisionContext& c) {
  if (c.st.breaker.state() != BreakerState::kOpen) return std::nullopt;
  return Park(c, Reason::kCircuitOpen, c.st.breaker.open_until());
}

GateAnswer RetryAfterWindow(DecisionContext& c) {
  if (c.st.retry_after_until_ns <= Nanos(c.now)) return std::nullopt;
  return Park(c, Reason::kRetryAfterWindow,
              FromNanos(c.st.retry_after_until_ns));
}

GateAnswer BudgetEmpty(DecisionContext& c) {
  // Answers at once: no delay is computed for a retry that will not be
  // allowed, and the decorrelated state does not move.
  if (c.st.budget.CanRetry(c.p.budget, c.now)) return std::nullopt;
  // The budget frees up as the window slides: come back no sooner than one
  // slot from now (and at the endpoint's release pace).
  return Park(c, Reason::kBudgetExhausted,
              c.now + c.p.budget.window / RetryBudget::kSlots);
}

GateAnswer HalfOpenBusy(DecisionContext& c) {
  if (c.st.breaker.state() != BreakerState::kHalfOpen) return std::nullopt;
  const bool held =
      c.probe_hold != nullptr && (*c.probe_hold)(c.st.key(), c.now);
  if (!held && c.st.breaker.ProbeSlotFree(c.p.breaker, c.now)) {
    return std::nullopt;
  }
  return Park(c, Reason::kHalfOpenBusy,
              c.now + std::max(kMinHalfOpenWait, c.p.deferral.spread));
}

GateAnswer HalfOpenProbe(DecisionContext& c) {
  if (c.st.breaker.state() != BreakerState::kHalfOpen) return std::nullopt;
  c.st.breaker.AcquireProbe();
  return Answer::Proceed(Reason::kHalfOpenProbe, absl::ZeroDuration());
}

GateAnswer ReleasePace(DecisionContext& c) {
  const bool paced = Releasing(c.st, c.now) ||
                     (c.waiting && c.st.release != nullptr &&
                      !GateClosed(c.st, c.now));
  if (!paced) return std::nullopt;
  EndpointRelease& rel = *c.st.release;
  if (rel.pacer.TakeSlot(c.now, rel.capacity.Pace(c.p.deferral))) {
    return std::nullopt;
  }
  return Park(c, Reason::kPaced, c.now);
}

GateAnswer Overload(DecisionContext& c, bool overload) {
  // The pace let more through than the endpoint takes: the retry waits for
  // the next slot on the release queue at the new pace, not for a backoff
  // on top of the queue's own load.
  if (!overload) return std::nullopt;
  return Park(c, Reason::kPaced, c.now);
}

Answer RetryDelay(DecisionContext& c, int failed_attempt) {
  EndpointState& st = c.st;
  const absl::Duration policy_delay =
      NextBackoff(c.p.backoff, failed_attempt,
                  absl::Nanoseconds(st.previous_delay_ns), c.rng);
  Answer a = Answer::Proceed(Reason::kBackoff, policy_delay);
  // The fleet-wide Retry-After (this report's, or one another worker
  // reported) wins over the computed delay; the retry lands spread after
  // the instant the endpoint named, not on it.
  const absl::Duration ra_left = FromNanos(st.retry_after_until_ns) - c.now;
  if (ra_left > absl::ZeroDuration() && ra_left >= policy_delay) {
    a = Answer::Proceed(Reason::kRetryAfter,
                        ra_left + UniformDuration(c.rng, c.p.deferral.spread));
  }
  a = FitBeforeDeadline(c, a);
  if (a.verdict == Verdict::kGiveUp) return a;
  // The decorrelated state grows from failures the endpoint did not
  // schedule itself: while its Retry-After window is in force, the window
  // paces the retries, and a burst of such reports must not push the
  // fleet's backoff to the cap. It keeps the policy's draw, not a
  // shortened one: the deadline is this delivery's, the state the fleet's.
  if (c.p.backoff.kind == BackoffKind::kDecorrelatedJitter &&
      ra_left <= absl::ZeroDuration()) {
    st.previous_delay_ns = absl::ToInt64Nanoseconds(policy_delay);
  }
  return a;
}

Answer FitBeforeDeadline(DecisionContext& c, const Answer& a) {
  const absl::Duration left = c.deadline - c.now;
  const absl::Duration room = left - kLastChanceWindow;
  const absl::Duration base = c.p.backoff.base;
  // A backoff that would leave no room for another attempt, while there is
  // room for one before the last-chance window: redraw over that room.
  if (a.reason == Reason::kBackoff && a.delay > room && room > base) {
    return Answer::Proceed(Reason::kBackoff,
                           base + UniformDuration(c.rng, room - base));
  }
  if (a.delay <= left) return a;  // starts in time
  // This failure came back inside the last-chance window: it was the last.
  if (left <= kLastChanceWindow) return Answer::GiveUp(Reason::kDeadline);
  return Answer::Proceed(Reason::kLastChance, LastChanceLanding(c) - c.now);
}

// ---- Learning ---------------------------------------------------------

void RefreshBreaker(DecisionContext& c, Decision* d) {
  AddTransition(c, d, c.st.breaker.Refresh(c.p.breaker, c.now));
  SyncGate(c);
}

void LearnFromAnswer(DecisionContext& c, uint64_t admission, Decision* d) {
  EndpointState& st = c.st;
  EndpointRelease* rel = st.release.get();
  const bool probe = st.breaker.state() == BreakerState::kHalfOpen &&
                     CountsAsProbe(admission, c.token_salt,
                                   st.breaker.generation());
  if (rel != nullptr && probe) {
    // The latest probe went out at open_until() (circuit_breaker.h).
    rel->capacity.SampleRtt(c.now - st.breaker.open_until());
  }
  AddTransition(c, d, st.breaker.OnAnswer(c.p.breaker, c.now, probe));
  SyncGate(c);
  st.served.OnSuccess(c.now);
  st.last_success_ns = Nanos(c.now);
  if (rel != nullptr) {
    rel->capacity.OnSuccess(c.p.deferral, c.now, rel->pacer.backlog());
  }
}

bool LearnFromFailure(DecisionContext& c, const ReportInput& in, Decision* d) {
  EndpointState& st = c.st;
  // A 429 with Retry-After is the endpoint pacing us, not failing: it does
  // not feed the breaker. Without Retry-After it counts.
  const bool paced =
      in.outcome == Outcome::kRateLimited && in.retry_after.has_value();
  // A failure of an attempt the release queue let through while the gate
  // was open may say the pace is more than the endpoint takes.
  const bool released =
      Releasing(st, c.now) && !GateClosed(st, c.now) && !paced;
  CapacityEstimator::FailureSignal signal;
  if (st.release != nullptr) {
    signal = st.release->capacity.OnFailure(c.p.deferral, c.now, released);
  }
  d->pace_cut = signal.cut;
  if (in.retry_after.has_value()) RememberRetryAfter(c, *in.retry_after, d);
  // A failed retry is what the budget bounds: it spends now, unless it was
  // overload: the learned pace bounds that load (it is re-paced), and
  // spending would stop the whole queue, successes included, for a budget
  // window.
  if (in.attempt > 1 && !signal.overload) {
    st.budget.RecordRetry(c.p.budget, c.now);
  }
  // An overload failure is the pace's doing, not the endpoint being down
  // (it is serving): the breaker does not see it.
  if (!paced && !signal.overload) {
    AddTransition(c, d, st.breaker.OnFailure(c.p.breaker, c.now, c.rng));
  }
  SyncGate(c);
  return signal.overload;
}

// ---- Parking ----------------------------------------------------------

Answer Park(DecisionContext& c, Reason r, absl::Time target) {
  const DeferralParams& dp = c.p.deferral;
  EndpointRelease* rel = c.st.release.get();
  if (c.recheck) {  // parked when it arrived: book nothing, look again then
    const absl::Time t = r == Reason::kPaced && rel != nullptr
                             ? std::max(rel->pacer.NextSlot(), c.now)
                             : target;
    if (t > c.deadline) return LastChance(c, r);
    c.wait_target = t;
    return Answer::Defer(r, t);
  }
  absl::Time back;
  if (rel == nullptr) {  // no release running: only check-ins happen
    back = ReleasePacer::OpenCheckIn(dp, c.now, target, c.rng);
  } else if (r == Reason::kPaced) {
    back = rel->pacer.Queue(dp, c.now, target, rel->capacity.Pace(dp),
                            rel->capacity.growing(), c.rng);
  } else {
    back = rel->pacer.CheckIn(dp, c.now, target, c.rng);
  }
  if (back <= c.deadline) {
    if (c.waiting) c.wait_target = r == Reason::kPaced ? back : target;
    return Answer::Defer(r, back);
  }
  return LastChance(c, r);
}

Answer LastChance(DecisionContext& c, Reason r) {
  const absl::Duration left = c.deadline - c.now;
  if (left <= absl::ZeroDuration() ||
      (c.after_failure && left <= kLastChanceWindow)) {
    return Answer::GiveUp(Reason::kDeadline);
  }
  if (left <= kLastChanceWindow) {
    return Answer::Proceed(Reason::kLastChance, absl::ZeroDuration());
  }
  return Answer::Defer(r, LastChanceLanding(c));
}

absl::Time LastChanceLanding(DecisionContext& c) {
  return c.deadline - kLastChanceWindow +
         UniformDuration(c.rng, kLastChanceWindow - kLastChanceMargin);
}

}  // namespace stagger::engine
