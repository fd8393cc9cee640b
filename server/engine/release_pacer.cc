#include "server/engine/release_pacer.h"

#include <algorithm>

#include "server/engine/backoff.h"

namespace stagger::engine {
namespace {

int64_t Ns(absl::Time t) { return absl::ToUnixNanos(t); }
int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
int64_t SlotNs(double pace) {
  return std::max<int64_t>(1, static_cast<int64_t>(1e9 / std::max(pace, 1e-3)));
}

}  // namespace

absl::Time ReleasePacer::Park(const DeferralParams& p, absl::Time now,
                              absl::Time target, bool gate_closed, double pace,
                              bool growing, absl::BitGenRef rng) {
  const int64_t t = Ns(now);
  int64_t back;
  if (gate_closed) {
    // Check in again around the gate's expected opening, every W or so,
    // W growing with the outage (fewer calls in a long one).
    const int64_t age = closed_since_ns_ == 0 ? 0 : t - closed_since_ns_;
    const int64_t w = std::max<int64_t>(
        Ns(p.spread), static_cast<int64_t>(age * kCheckInShare));
    back = std::max(Ns(target), t + w / 2) +
           Ns(UniformDuration(rng, absl::Nanoseconds(w)));
    parked_seconds_ += static_cast<float>((back - t) * 1e-9);
  } else {
    const int64_t slot_ns = SlotNs(pace);
    const int64_t lead = Ns(growing ? kGrowingLead : kSteadyLead);
    const int64_t tail = std::max(tail_ns_, t);
    if (Ns(target) > tail) {
      // Beyond the queue: at its own instant, leaving the queue as it is.
      back = Ns(target) + Ns(UniformDuration(rng, absl::Nanoseconds(slot_ns)));
    } else if (tail - t > lead) {
      back = t + lead + Ns(UniformDuration(rng, p.spread));
    } else {
      tail_ns_ = tail + slot_ns;
      back = tail + Ns(UniformDuration(rng, absl::Nanoseconds(slot_ns)));
    }
  }
  release_end_ns_ = std::max(release_end_ns_, back + Ns(p.spread));
  return absl::FromUnixNanos(back);
}

void ReleasePacer::OnGateClosed(absl::Time now) {
  if (closed_since_ns_ != 0) return;
  closed_since_ns_ = std::max<int64_t>(1, Ns(now));
  parked_seconds_ = 0;
}

void ReleasePacer::OnGateOpened(absl::Time now) {
  if (closed_since_ns_ == 0) return;
  const double closed_s =
      std::max(1e-3, (Ns(now) - closed_since_ns_) * 1e-9);
  backlog_ = static_cast<float>(parked_seconds_ / closed_s);
  closed_since_ns_ = 0;
}

bool ReleasePacer::TakeSlot(absl::Time now, double pace) {
  const int64_t t = Ns(now);
  const int64_t slot_ns = SlotNs(pace);
  if (gate_ns_ - t > Ns(kBurst)) return false;
  gate_ns_ = std::max(gate_ns_, t - Ns(kBurst)) + slot_ns;
  return true;
}

}  // namespace stagger::engine
