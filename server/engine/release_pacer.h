// ReleasePacer: one endpoint's release queue. Deliveries that must wait (the
// breaker is open, a Retry-After window runs, the budget is empty, or the
// queue itself is full) are parked with a time to come back; while a
// backlog is being released, every admission takes a slot at the learned
// pace (capacity_estimator.h), so a parked herd returns as a stream the
// endpoint can take.
//
//   Park(now, target): the instant a parked delivery comes back.
//     Gate closed (the caller says so): target + uniform [0, spread): the
//       delivery checks in when the gate is expected to open; nothing is
//       booked, since nobody knows yet at what pace the backlog will go.
//     Otherwise a slot on the queue at the pace: max(target, tail), the
//       tail moving on by 1/pace, jittered within the slot. A slot more
//       than lead() ahead is not booked: the delivery checks in again at
//       now + lead() (while the pace is still being learned, a booking far
//       ahead would hold it back from a pace that grows).
//   TakeSlot(now): at admission during a release: true (and the slot is
//     used) if the pace has room now, within a burst of kBurst.
//   Releasing(now): a backlog is still coming back: admissions are paced.
// Every deferral extends the release to its return instant plus one spread,
// so every parked delivery is paced when it returns.
//
// Not thread-safe: the engine holds the endpoint's shard lock.
#ifndef STAGGER_SERVER_ENGINE_RELEASE_PACER_H_
#define STAGGER_SERVER_ENGINE_RELEASE_PACER_H_

#include <cstdint>

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "server/engine/engine_config.h"

namespace stagger::engine {

class ReleasePacer {
 public:
  // Bursts of admissions up to this long at the pace pass at once.
  static constexpr absl::Duration kBurst = absl::Milliseconds(100);
  // Bookings reach at most this far ahead while the pace is still growing
  // (slow start), and kSteadyLead once it has settled: a booking is a
  // promise at today's pace, and the pace keeps probing upwards.
  static constexpr absl::Duration kGrowingLead = absl::Seconds(1);
  static constexpr absl::Duration kSteadyLead = absl::Seconds(5);
  // While the gate is closed, a parked delivery checks in about every
  // max(spread, this share of the time the gate has been closed).
  static constexpr double kCheckInShare = 1.0 / 16;

  bool Releasing(absl::Time now) const {
    return absl::ToUnixNanos(now) < release_end_ns_;
  }
  absl::Time Park(const DeferralParams& p, absl::Time now, absl::Time target,
                  bool gate_closed, double pace, bool growing,
                  absl::BitGenRef rng);
  bool TakeSlot(absl::Time now, double pace);

  // The gate closed / opened. While it is closed the pacer estimates how
  // many deliveries are parked (Little's law: the time they were told to
  // wait, per second of closed gate).
  void OnGateClosed(absl::Time now);
  void OnGateOpened(absl::Time now);
  // Deliveries parked during the last closed period, as estimated when it
  // ended (0 before the first).
  double backlog() const { return backlog_; }
  // The next free slot (the queue's tail), for inspection.
  absl::Time tail() const { return absl::FromUnixNanos(tail_ns_); }

 private:
  int64_t tail_ns_ = 0;         // next free slot on the queue
  int64_t gate_ns_ = 0;         // GCRA: theoretical time of the next release
  int64_t release_end_ns_ = 0;  // the release lasts until then
  int64_t closed_since_ns_ = 0;  // 0: the gate is open
  float parked_seconds_ = 0;     // waits handed out since then
  float backlog_ = 0;
};

}  // namespace stagger::engine

#endif  // STAGGER_SERVER_ENGINE_RELEASE_PACER_H_
