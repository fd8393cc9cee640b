#include "server/daemon/decision_services.h"

#include "absl/strings/str_cat.h"
#include "server/daemon/log.h"

namespace stagger::daemon {

absl::Status CheckMaxWaitingCalls(int64_t max_waiting_calls) {
  if (max_waiting_calls >= 0 && max_waiting_calls <= kMaxWaitingCalls) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--max_waiting_calls: must be in [0, ", kMaxWaitingCalls,
                   "], got ", max_waiting_calls));
}

DecisionServices::DecisionServices(engine::Engine* engine,
                                   const Options& options,
                                   metrics::ServerMetrics* metrics,
                                   security::SecurityMetrics* security_metrics)
    : coordinator_(engine, metrics, engine::RealClock::Instance()),
      admin_(engine, security_metrics, engine::RealClock::Instance(), Log),
      leases_(engine, options.lease_ttl, options.ownership, metrics) {
  if (options.ownership != nullptr) {
    coordinator_.set_ownership(options.ownership);
  }
  coordinator_.set_lease_hub(&leases_.hub());
  admin_.set_lease_hub(&leases_.hub());
  const service::WaitRoom::Answered answered =
      [metrics](const engine::Decision& d) {
        if (metrics != nullptr) {
          metrics->RecordDecision(metrics::ServerMetrics::Call::kAdmit, d);
        }
      };
  if (options.max_waiting_calls > 0) {
    waits_ = std::make_unique<service::WaitRoom>(
        engine, engine::RealClock::Instance(),
        service::WaitRoom::Options{
            static_cast<size_t>(options.max_waiting_calls)},
        answered, metrics);
    coordinator_.set_wait_room(waits_.get());
    admin_.set_wait_room(waits_.get());
    leases_.hub().set_on_successes(
        [room = waits_.get()](absl::string_view key) { room->Wake(key); });
  }
  // Agents' held calls wait in the same room (answered at once without one).
  leases_.sync().set_held_calls(
      [engine, room = waits_.get(), answered](service::AgentHeldCalls::Send send) {
        return service::AgentHeldCalls::Make(
            engine, room, engine::RealClock::Instance(), answered,
            std::move(send));
      });
}

std::vector<grpc::Service*> DecisionServices::services() {
  return {&coordinator_, &admin_, &leases_.sync()};
}

void DecisionServices::BeforeClose() {
  if (waits_ != nullptr) waits_->Shutdown();
  leases_.hub().Shutdown();
}

}  // namespace stagger::daemon
