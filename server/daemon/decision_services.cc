#include "server/daemon/decision_services.h"

#include "absl/strings/str_cat.h"
#include "server/daemon/log.h"

namespace stagger::daemon {

absl::Status CheckMaxWaitingCalls(absl::string_view flag, int64_t value) {
  if (value >= 0 && value <= kMaxWaitingCalls) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": must be in [0, ", kMaxWaitingCalls, "], got ", value));
}

DecisionServices::DecisionServices(engine::Engine* engine,
                                   const Options& options,
                                   metrics::ServerMetrics* metrics,
                                   security::SecurityMetrics* security_metrics)
    : coordinator_(engine, metrics, engine->clock()),
      admin_(engine, security_metrics, engine->clock(), Log),
      leases_(engine, options.lease_ttl, options.ownership, metrics,
              options.attach_leases) {
  if (options.ownership != nullptr) {
    coordinator_.set_ownership(options.ownership);
  }
  coordinator_.set_before_decision(
      [this](absl::string_view key) { leases_.StandIn(key); });
  const service::WaitRoom::Answered answered =
      [metrics](const engine::Decision& d) {
        if (metrics != nullptr) {
          metrics->RecordDecision(metrics::ServerMetrics::Call::kAdmit, d);
        }
      };
  if (options.max_waiting_calls > 0 || options.max_agent_held_calls > 0) {
    waits_ = std::make_unique<service::WaitRoom>(
        engine, engine->clock(),
        service::WaitRoom::Options{
            static_cast<size_t>(options.max_waiting_calls),
            static_cast<size_t>(options.max_agent_held_calls)},
        answered, metrics);
  }
  if (options.max_waiting_calls > 0) coordinator_.set_wait_room(waits_.get());
  if (waits_ != nullptr) admin_.set_wait_room(waits_.get());
  // Agents' held calls wait in the same room (answered at once without one).
  service::WaitRoom* agents_room =
      options.max_agent_held_calls > 0 ? waits_.get() : nullptr;
  leases_.sync().set_held_calls(
      [engine, room = agents_room, answered](service::AgentHeldCalls::Send send,
                                             const std::string& agent) {
        return service::AgentHeldCalls::Make(
            engine, room, engine->clock(), answered,
            std::move(send), agent);
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
