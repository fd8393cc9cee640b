#include "core/engine/release_pacer.h"

#include <algorithm>

#include "core/engine/backoff.h"

namespace stagger::engine {
namespace {

int64_t Ns(absl::Time t) { return absl::ToUnixNanos(t); }
int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
int64_t SlotNs(double pace) {
  return std::max<int64_t>(1, static_cast<int64_t>(1e9 / std::max(pace, 1e-3)));
}
int64_t UniformNs(absl::BitGenRef rng, int64_t ns) {
  return Ns(UniformDuration(rng, absl::Nanoseconds(ns)));
}

}  // namespace

void ReleasePacer::Extend(const DeferralParams& p, int64_t back_ns) {
  release_end_ns_ = std::max(release_end_ns_,
                             back_ns + std::max(Ns(p.spread), Ns(kReleaseTail)));
}

absl::Time ReleasePacer::CheckIn(const DeferralParams& p, absl::Time now,
                                 absl::Time target, absl::BitGenRef rng) {
  const int64_t t = Ns(now);
  const int64_t age = gate_closed() ? t - closed_since_ns_ : 0;
  const int64_t w = std::max<int64_t>(
      Ns(p.spread), static_cast<int64_t>(age * kCheckInShare));
  const int64_t back = std::max(Ns(target), t + w / 2) + UniformNs(rng, w);
  if (gate_closed()) {
    parked_seconds_ += static_cast<float>((back - t) * 1e-9);
    Extend(p, back);
  }
  return absl::FromUnixNanos(back);
}

absl::Time ReleasePacer::OpenCheckIn(const DeferralParams& p, absl::Time now,
                                     absl::Time target, absl::BitGenRef rng) {
  const int64_t w = Ns(p.spread);
  return absl::FromUnixNanos(std::max(Ns(target), Ns(now) + w / 2) +
                             UniformNs(rng, w));
}

absl::Time ReleasePacer::Queue(const DeferralParams& p, absl::Time now,
                               absl::Time target, double pace, bool growing,
                               absl::BitGenRef rng) {
  const int64_t t = Ns(now);
  const int64_t slot_ns = SlotNs(pace);
  const int64_t lead = Ns(growing ? kGrowingLead : kSteadyLead);
  const int64_t tail = std::max(tail_ns_, t);
  int64_t back;
  if (Ns(target) > tail) {
    // Beyond the queue: at its own instant, leaving the queue as it is.
    back = Ns(target) + UniformNs(rng, slot_ns);
  } else if (tail - t > lead) {
    back = t + lead + UniformNs(rng, Ns(p.spread));
  } else {
    tail_ns_ = tail + slot_ns;
    back = tail + UniformNs(rng, slot_ns);
  }
  Extend(p, back);
  return absl::FromUnixNanos(back);
}

absl::Time ReleasePacer::Front(const DeferralParams& p, absl::Time now,
                               double pace, absl::BitGenRef rng) {
  const int64_t back =
      std::max(Ns(now), gate_ns_ - Ns(kBurst)) + UniformNs(rng, SlotNs(pace));
  Extend(p, back);
  return absl::FromUnixNanos(back);
}

void ReleasePacer::Pause(const DeferralParams& p, absl::Time until) {
  gate_ns_ = std::max(gate_ns_, Ns(until) + Ns(kBurst));
  tail_ns_ = std::max(tail_ns_, Ns(until));
  Extend(p, Ns(until));
}

bool ReleasePacer::TakeSlot(absl::Time now, double pace) {
  const int64_t t = Ns(now);
  if (gate_ns_ - t > Ns(kBurst)) return false;
  gate_ns_ = std::max(gate_ns_, t) + SlotNs(pace);
  return true;
}

void ReleasePacer::OnGateClosed(absl::Time now) {
  if (gate_closed()) return;
  closed_since_ns_ = std::max<int64_t>(1, Ns(now));
  parked_seconds_ = 0;
}

void ReleasePacer::OnGateOpened(absl::Time now) {
  if (!gate_closed()) return;
  const double closed_s = std::max(1e-3, (Ns(now) - closed_since_ns_) * 1e-9);
  backlog_ = static_cast<float>(parked_seconds_ / closed_s);
  closed_since_ns_ = 0;
  opened_ns_ = std::max<int64_t>(1, Ns(now));
}

PacerRecord ReleasePacer::Save() const {
  PacerRecord r;
  r.tail_ns = tail_ns_;
  r.gate_ns = gate_ns_;
  r.release_end_ns = release_end_ns_;
  r.closed_since_ns = closed_since_ns_;
  r.opened_ns = opened_ns_;
  r.parked_seconds = parked_seconds_;
  r.backlog = backlog_;
  return r;
}

void ReleasePacer::Restore(const PacerRecord& r) {
  auto amount = [](float v) { return v >= 0 && v < 1e12f ? v : 0.0f; };
  tail_ns_ = r.tail_ns;
  gate_ns_ = r.gate_ns;
  release_end_ns_ = r.release_end_ns;
  closed_since_ns_ = r.closed_since_ns;
  opened_ns_ = r.opened_ns;
  parked_seconds_ = amount(r.parked_seconds);
  backlog_ = amount(r.backlog);
}

}  // namespace stagger::engine
