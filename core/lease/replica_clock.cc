#include "core/lease/replica_clock.h"

#include "core/lease/planted.h"

namespace stagger::lease {
namespace {

// The planted regression's clock: `wall`, steps and all.
class WallItself final : public engine::Clock {
 public:
  explicit WallItself(const engine::Clock* wall) : wall_(wall) {}
  absl::Time Now() const override { return wall_->Now(); }

 private:
  const engine::Clock* const wall_;
};

}  // namespace

std::unique_ptr<engine::Clock> ReplicaEngineClock(const engine::Clock* wall,
                                                  const engine::Clock* steady) {
  if (Planted().engine_on_wall_clock) return std::make_unique<WallItself>(wall);
  return std::make_unique<engine::SteadyWallClock>(wall, steady);
}

}  // namespace stagger::lease
