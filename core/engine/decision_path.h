// The decision path: Admit and Report as columns of named gates.
//
// Each gate looks at one fact of the endpoint's state and either answers
// (a verdict with its reason and timing) or passes (std::nullopt), in the
// style of Envoy's shouldRetry(). The gates run top to bottom; the first
// answer wins:
//   Admit:  Disabled, Paused, AttemptLimit, DeadlinePassed, (refresh the breaker), BreakerOpen,
//           for a retry RetryAfterWindow and BudgetEmpty, HalfOpenBusy,
//           HalfOpenProbe, ReleasePace, else proceed (a first attempt with
//           its initial jitter).
//   Report: a failure or not retryable first meets Disabled, then Paused
//           (nothing learnt, nothing changed); (refresh the breaker) success / not
//           retryable: the endpoint answered, done. A failure: LearnFromFailure, then
//           AttemptLimit, BreakerOpen, HalfOpenBusy, Overload, BudgetEmpty,
//           RetryDelay (policy delay, Retry-After, fitted before the
//           deadline).
// A gate that makes the delivery wait parks it (Park: a check-in, or a slot
// on the endpoint's release queue), or gives it its last chance when the
// wait would cross its deadline. docs/API.md, "The decision order", is the
// contract. Everything here runs under the endpoint's shard lock; time and
// randomness come only from the context.
#ifndef STAGGER_CORE_ENGINE_DECISION_PATH_H_
#define STAGGER_CORE_ENGINE_DECISION_PATH_H_

#include <functional>
#include <optional>

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

class EndpointTable;

// A delivery turned away while the breaker's probes are out waits at least
// this long before it asks again (even with deferral.spread = 0).
inline constexpr absl::Duration kMinHalfOpenWait = absl::Milliseconds(100);
// A delivery whose wait would cross its deadline comes back within this
// long before the deadline, and then goes as a last-chance attempt ...
inline constexpr absl::Duration kLastChanceWindow = absl::Seconds(1);
// ... but no later than this before it: a worker that wakes a little late
// (a loaded machine, a GC pause) must still find time left to start.
inline constexpr absl::Duration kLastChanceMargin = absl::Milliseconds(250);

// The facts of one decision on one endpoint.
struct DecisionContext {
  EndpointState& st;
  const PolicyParams& p;
  absl::Time now;
  // The earlier of the caller's deadline and the policy's horizon.
  absl::Time deadline;
  absl::BitGenRef rng;
  // Counts breaker transitions; nullptr for an untracked (scratch) state.
  EndpointTable* table;
  // A failure report (it may already have had its last chance); Admit
  // otherwise.
  bool after_failure;
  // The end of the operator's pause covering the endpoint (pause_table.h);
  // InfinitePast if none.
  absl::Time paused_until = absl::InfinitePast();
  // The engine's salt for probe admission tokens (admission.h).
  uint32_t token_salt = 0;
  // An outside reason to hold a probe back (Engine::set_probe_hold); null:
  // none.
  const std::function<bool(absl::string_view, absl::Time)>* probe_hold =
      nullptr;
  // Deciding for a waiting call (DecideWaiting): the pace applies whenever
  // the endpoint has a learned pace (held calls come back through it, not
  // only while a release runs), and Park records in `wait_target` when the
  // call should be looked at again; with `recheck`, Park books nothing
  // (the call was parked when it arrived).
  bool waiting = false;
  bool recheck = false;
  absl::Time wait_target = absl::InfiniteFuture();
};

// The earlier of `deadline` and first_attempt + the policy's horizon
// (InfiniteFuture if neither).
absl::Time EffectiveDeadline(const PolicyParams& p, absl::Time deadline,
                             absl::Time first_attempt);

// What a gate answers: what the worker does next. The facts for metrics
// (transitions, Retry-After seen) stay on the Decision being built.
struct Answer {
  Verdict verdict;
  Reason reason;
  absl::Duration delay = absl::ZeroDuration();    // kProceed
  absl::Time defer_until = absl::InfinitePast();  // kDefer

  static Answer Proceed(Reason r, absl::Duration delay) {
    return {Verdict::kProceed, r, delay};
  }
  static Answer Defer(Reason r, absl::Time until) {
    return {Verdict::kDefer, r, absl::ZeroDuration(), until};
  }
  static Answer GiveUp(Reason r) { return {Verdict::kGiveUp, r}; }
  static Answer Done(Reason r) { return {Verdict::kDone, r}; }
};
using GateAnswer = std::optional<Answer>;

// The two decisions (inputs already validated).
Decision DecideAdmit(DecisionContext& c, const AdmitInput& in);
Decision DecideReport(DecisionContext& c, const ReportInput& in);

// A waiting Admit's step (decision.h, "Waiting admission"):
//   kArrive: the gates run as for an Admit. GIVE_UP, a first attempt, a
//     probe, a last chance, or anything during a release answers now. A
//     retry that could go holds as a backoff wait; a DEFER holds (the call
//     is parked as the DEFER would have parked it).
//   kRecheck: a backoff wait goes only on evidence since it arrived (a
//     success, or the end of a Retry-After window: EvidenceAfter); then,
//     like any held call, it goes if the gates let it (reason RELEASED, or
//     HALF_OPEN_PROBE / LAST_CHANCE as given), at the learned pace. A call
//     the gates hold books nothing.
//   kExpire, or at `until`: the Admit's own answer, side effects and all.
// Holding, the outcome's `recheck` is when something may change for it.
WaitOutcome DecideWaiting(DecisionContext& c, const AdmitInput& in,
                          WaitState& w, WaitStep step);
// The latest sign that the endpoint takes deliveries again: its last
// success, or the end of its Retry-After window if that has passed.
absl::Time LastEvidence(const EndpointState& st, absl::Time now);

// The gates. `attempt` is the attempt the decision is about (Admit: the
// request's; failure report: the next one).
// The endpoint is disabled (EndpointState::disabled): GIVE_UP(
// ENDPOINT_DISABLED), nothing sent, its state not touched. Before the
// pause: a disabled endpoint's deliveries are not to be made at all, and
// holding them for a pause would only delay their dead-lettering.
GateAnswer Disabled(const DecisionContext& c);
// An operator's pause covers the endpoint: DEFER(PAUSED) until it ends,
// spread over deferral.spread after it; the endpoint's state is not touched.
GateAnswer Paused(DecisionContext& c);
GateAnswer AttemptLimit(const DecisionContext& c, int attempt);
GateAnswer DeadlinePassed(const DecisionContext& c);
GateAnswer BreakerOpen(DecisionContext& c);
GateAnswer RetryAfterWindow(DecisionContext& c);
GateAnswer BudgetEmpty(DecisionContext& c);
// HALF_OPEN with every probe slot taken (frees timed-out slots first), or
// the probe held back from outside (DecisionContext::probe_hold).
GateAnswer HalfOpenBusy(DecisionContext& c);
// HALF_OPEN with a slot free (after HalfOpenBusy): takes the probe.
GateAnswer HalfOpenProbe(DecisionContext& c);
// Parked deliveries are being released and the queue has no slot now.
GateAnswer ReleasePace(DecisionContext& c);
// The failure was overload (the pace let through more than the endpoint
// takes): wait for the next slot at the new pace.
GateAnswer Overload(DecisionContext& c, bool overload);
// The last gate of a failure: the policy's delay, or the endpoint's
// Retry-After if longer, fitted before the deadline (FitBeforeDeadline).
// `failed_attempt` is the attempt that failed.
Answer RetryDelay(DecisionContext& c, int failed_attempt);
// A retry `a` (PROCEED with reason kBackoff or kRetryAfter) and the
// deadline. A backoff that would land inside the last kLastChanceWindow or
// past the deadline is redrawn uniformly over [base, deadline -
// kLastChanceWindow) when that is longer than base: the delivery keeps room
// for more attempts instead of waiting out its deadline for one. Otherwise
// a retry that would start past the deadline goes as the last chance
// (LastChanceLanding), or GIVE_UP(DEADLINE) if this failure already came
// back inside the window. A Retry-After is never redrawn earlier: the
// endpoint named its instant. Anything else is returned as it is.
Answer FitBeforeDeadline(DecisionContext& c, const Answer& a);

// Learning. The breaker may change state (Refresh: an OPEN breaker past its
// time half-opens); the capacity estimator hears whether the gate is open.
void RefreshBreaker(DecisionContext& c, Decision* d);
// The endpoint answered (a success, or a 4xx that shows it is up) to an
// attempt admitted with `admission` (only a probe's answer moves a
// half-open breaker, and times the round trip).
void LearnFromAnswer(DecisionContext& c, uint64_t admission, Decision* d);
// A failure: capacity estimator, Retry-After, budget, breaker. True if it
// was overload.
bool LearnFromFailure(DecisionContext& c, const ReportInput& in, Decision* d);

// An operator forced the breaker (Admin/ForceBreaker): counts the
// transition `t` (if any) and tells the release side whether the gate is
// open now.
void ApplyForcedBreaker(DecisionContext& c,
                        const CircuitBreaker::MaybeTransition& t);

// Parks the delivery until no earlier than `target` (release_pacer.h: a slot
// on the queue for kPaced, a check-in otherwise), or gives it its last
// chance if that is past its deadline.
Answer Park(DecisionContext& c, Reason r, absl::Time target);
// A wait that would cross the deadline: come back inside the last
// kLastChanceWindow before it and go then, through any gate; give up if no
// attempt can start in time, or if this failure already came back inside
// that window (the delivery has had its last chance).
Answer LastChance(DecisionContext& c, Reason r);
// When a last-chance attempt is due: spread over [deadline -
// kLastChanceWindow, deadline - kLastChanceMargin).
absl::Time LastChanceLanding(DecisionContext& c);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_DECISION_PATH_H_
