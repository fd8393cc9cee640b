#include "core/lease/ack_history.h"

#include "core/lease/planted.h"

namespace stagger::lease {

void AckHistory::Add(uint64_t v, absl::Time at) {
  if (v <= latest_) return;
  latest_ = v;
  recent_.emplace_back(v, at);
  if (recent_.size() > kRecent) {
    floor_version_ = recent_.front().first;
    floor_time_ = recent_.front().second;
    recent_.pop_front();
  }
}

absl::Time AckHistory::FirstCovering(uint64_t v) const {
  if (Planted().ack_covers_newer && latest_ > 0) {
    // The hole: any acknowledgement is read as covering everything.
    return recent_.empty() ? floor_time_ : recent_.front().second;
  }
  if (floor_version_ >= v && floor_version_ > 0) return floor_time_;
  for (const auto& [version, at] : recent_) {
    if (version >= v) return at;
  }
  return absl::InfiniteFuture();
}

}  // namespace stagger::lease
