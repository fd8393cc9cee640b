// The coordinated row (Policy::kCoordinated): every decision from one real
// engine::Engine, taken the way the client takes it (sim.h, "The
// coordinated fleet"): with waiting admission through a model of
// staggerd's wait room (wait_room_model.h), and with agents holding leases
// (lease_model.h). Internal to bench/sim.
//
// Who holds a worker: a delivery holds one from the moment it gets it
// until it is parked (DEFER), waits with the coordinator (a waiting Admit
// for a DEFER or a backoff), or ends; without waiting admission it also
// holds it through a PROCEED delay (the old client sleeps in the worker).
// A waiting call answered PROCEED queues for a worker at the front and
// sends once it has one.
#ifndef STAGGER_BENCH_SIM_COORDINATED_H_
#define STAGGER_BENCH_SIM_COORDINATED_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/sim/fleet.h"
#include "bench/sim/lease_model.h"
#include "bench/sim/wait_room_model.h"
#include "core/engine/engine.h"

namespace stagger::sim {

class CoordinatedDriver final : public Fleet::Driver {
 public:
  explicit CoordinatedDriver(Fleet& fleet);
  ~CoordinatedDriver() override;

  void Start() override;
  absl::Status OnWorker(int64_t now, int id) override;
  absl::Status OnAnswer(int64_t now, int id) override;
  absl::Status OnEvent(const Event& e) override;

 private:
  engine::AdmitInput AdmitFor(int id, absl::Duration wait) const;
  engine::ReportInput ReportFor(int id) const;
  int AgentOf(int id) const { return id % s_.leases.agents; }
  // An Admit from a delivery that holds a worker (no wait).
  absl::Status Admit(int64_t now, int id);
  // A waiting Admit (wait > 0) from a delivery that holds none.
  absl::Status AdmitWaiting(int64_t now, int id, absl::Duration wait);
  // The success or failure Report of the attempt that just answered.
  absl::Status ReportSuccess(int64_t now, int id);
  absl::Status ReportFailure(int64_t now, int id);
  // What a delivery holding a worker does with a decision.
  absl::Status Follow(int64_t now, int id, const engine::Decision& dec);
  // ... with a DEFER: parked, its worker freed.
  absl::Status Park(int64_t now, int id, const engine::Decision& dec);
  // ... with the answer to a waiting call (it holds no worker).
  absl::Status FollowWaiting(int64_t now, int id, const engine::Decision& dec);
  // Frees the worker while the delivery waits with the coordinator for
  // `wait`, then hands free workers out.
  absl::Status WaitWithoutWorker(int64_t now, int id, absl::Duration wait);
  // Counts a decision's facts: deferrals, the first trip and probe.
  void Observe(int64_t now, const engine::Decision& d);
  // A call the engine refused (a bug in the simulator).
  static absl::Status Refused(const char* call, int attempt,
                              const absl::Status& st);

  Fleet& f_;
  const Scenario& s_;
  std::vector<std::string> keys_;  // the engine's key for each endpoint
  // Per delivery: its deadline and first-attempt time, as engine instants.
  std::vector<absl::Time> deadline_;
  std::vector<absl::Time> first_attempt_;
  absl::flat_hash_map<std::string, int> endpoint_of_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<WaitRoomModel> room_;    // waiting admission
  std::unique_ptr<LeaseNetwork> leases_;  // agents > 0
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_COORDINATED_H_
