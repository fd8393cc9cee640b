// ReleasePacer: one endpoint's release queue. A delivery that must wait is
// parked with a time to come back, in one of two ways:
//
//   CheckIn(now, target): the wait is for an event, not for a slot (the
//     breaker is open or probing, a Retry-After window runs, the retry
//     budget is empty). Come back at max(target, now + W/2) + uniform
//     [0, W): W = max(deferral.spread, kCheckInShare x how long the gate
//     has been closed), so a long outage costs fewer calls, and the fleet's
//     calls do not come together. Nothing is booked: nobody knows yet at
//     what pace the backlog will be able to go.
//   Queue(now, target, pace): a slot on the queue at the learned pace
//     (capacity_estimator.h): max(target, tail), the tail moving on by
//     1/pace, jittered within the slot. A slot more than lead() ahead is
//     not booked: the delivery checks in again at now + lead (a booking is
//     a promise at today's pace, and the pace may grow).
//   Front(now, pace): the front of the line, for a delivery the pace's
//     own overshoot turned away: the next free slot (NextSlot), jittered
//     within a slot, without moving the queue's tail.
//
// A closed gate starts a release: from then until every delivery parked
// meanwhile or queued has come back (Releasing), every admission takes a
// slot at the pace (TakeSlot, a GCRA with kBurst of tolerance: at most
// 1 + pace x kBurst at once, below a small limiter's burst), so a parked
// herd returns as a stream the endpoint can take. A limiter's word
// (Pause) lets nothing through before the instant it named. While the gate
// is closed the pacer also estimates how many deliveries are parked
// (Little's law: the waits it handed out, per second of closed gate), for
// GetEndpoint; it remembers when the gate last opened (opened(): evidence
// that the endpoint recovered, decision_path.h).
//
// Not thread-safe: the engine holds the endpoint's shard lock.
#ifndef STAGGER_CORE_ENGINE_RELEASE_PACER_H_
#define STAGGER_CORE_ENGINE_RELEASE_PACER_H_

#include <cstdint>

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

class ReleasePacer {
 public:
  // Bursts of admissions up to this long at the pace pass at once: less
  // than a small limiter's burst (nginx's limit_req burst=20 at 200r/s is
  // 100 ms of its rate).
  static constexpr absl::Duration kBurst = absl::Milliseconds(20);
  // Queue bookings reach at most this far ahead while the pace is still
  // growing fast, and kSteadyLead once it has settled.
  static constexpr absl::Duration kGrowingLead = absl::Seconds(1);
  static constexpr absl::Duration kSteadyLead = absl::Seconds(5);
  // While the gate is closed, a parked delivery checks in about every
  // max(spread, this share of the time the gate has been closed).
  static constexpr double kCheckInShare = 1.0 / 16;
  // A release lasts until the last delivery parked in it is due back, plus
  // max(spread, this): the parked come back a little late, not early.
  static constexpr absl::Duration kReleaseTail = absl::Seconds(1);

  absl::Time CheckIn(const DeferralParams& p, absl::Time now,
                     absl::Time target, absl::BitGenRef rng);
  // CheckIn for an endpoint whose gate has never closed (no pacer state).
  static absl::Time OpenCheckIn(const DeferralParams& p, absl::Time now,
                                absl::Time target, absl::BitGenRef rng);
  absl::Time Queue(const DeferralParams& p, absl::Time now, absl::Time target,
                   double pace, bool growing, absl::BitGenRef rng);
  absl::Time Front(const DeferralParams& p, absl::Time now, double pace,
                   absl::BitGenRef rng);
  // At admission during a release: true (and the slot is used) if the pace
  // has room now.
  bool TakeSlot(absl::Time now, double pace);
  // The same without using the slot.
  bool HasRoom(absl::Time now) const {
    return absl::FromUnixNanos(gate_ns_) - now <= kBurst;
  }
  // A limiter named `until`: no slot before it, and the release lasts
  // past it.
  void Pause(const DeferralParams& p, absl::Time until);
  // When TakeSlot will next have room (now or earlier: room now).
  absl::Time NextSlot() const {
    return absl::FromUnixNanos(gate_ns_) - kBurst;
  }
  bool Releasing(absl::Time now) const {
    return absl::ToUnixNanos(now) < release_end_ns_;
  }

  void OnGateClosed(absl::Time now);
  void OnGateOpened(absl::Time now);
  bool gate_closed() const { return closed_since_ns_ != 0; }
  // When the gate last opened after being closed (InfinitePast: never).
  absl::Time opened() const {
    return opened_ns_ == 0 ? absl::InfinitePast()
                           : absl::FromUnixNanos(opened_ns_);
  }
  // Deliveries parked during the last closed period, as estimated when it
  // ended (0 before the first).
  double backlog() const { return backlog_; }
  // The queue's tail (the next free slot), for inspection.
  absl::Time tail() const { return absl::FromUnixNanos(tail_ns_); }

  // The state file (endpoint_record.h): every field (already Unix ns).
  PacerRecord Save() const;
  void Restore(const PacerRecord& r);

 private:
  void Extend(const DeferralParams& p, int64_t back_ns);

  int64_t tail_ns_ = 0;          // next free slot on the queue
  int64_t gate_ns_ = 0;          // GCRA: theoretical time of the next release
  int64_t release_end_ns_ = 0;   // the release lasts until then
  int64_t closed_since_ns_ = 0;  // 0: the gate is open
  int64_t opened_ns_ = 0;        // the gate last opened; 0: never
  float parked_seconds_ = 0;     // waits handed out while it is closed
  float backlog_ = 0;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_RELEASE_PACER_H_
