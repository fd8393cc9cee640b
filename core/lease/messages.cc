#include "core/lease/messages.h"

namespace stagger::lease {

const char* WhyName(Why w) {
  switch (w) {
    case Why::kNearTrip: return "NEAR_TRIP";
    case Why::kBreaker: return "BREAKER";
    case Why::kRetryAfter: return "RETRY_AFTER";
    case Why::kReleasing: return "RELEASING";
    case Why::kPaused: return "PAUSED";
    case Why::kStandingIn: return "STANDING_IN";
    case Why::kDisabled: return "DISABLED";
  }
  return "WHY_UNSPECIFIED";
}

}  // namespace stagger::lease
