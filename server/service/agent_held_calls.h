// AgentHeldCalls: the waiting Admits one agent stream holds for staggerd
// (proto/stagger/v1/sync.proto, "Held calls"), each entered in the WaitRoom
// as a call of its own, so that the agent's calls are released as staggerd's
// own held calls are (pace, urgency, probes, expiry).
//
//   * Hold(h): h.request is validated as an Admit (an error is answered at
//     once, as that Admit's error: INVALID_ARGUMENT naming the field),
//     then the engine decides (WaitStep::kArrive): answered now, or an
//     entry in the room until min(request.wait, the room's rules). A full
//     room (or no room: --max_waiting_calls=0) answers as an Admit would
//     now. Hold fails only for a bad id (0, or one already held): the
//     stream is then ended by its caller.
//   * Every id is answered exactly once through `send`: the room's
//     decision, or CANCELLED after Drop(id). `send` gets the call's
//     endpoint too, so a stream that cannot deliver an answer can give its
//     probe back (Return).
//   * Return(endpoint, admission): a release the agent could not use (its
//     worker had gone); a probe goes back to the engine and the endpoint's
//     line is looked at, so the next waiter gets it.
//   * Unsent(answer, endpoint): an answer `send` took that the stream
//     will never write (it ended first). A probe it carried goes back at
//     once (Return), so the slot does not wait out probe_timeout.
//   * Close(): the stream ended. Every entry leaves the room (a probe
//     already released to one goes back), nothing more is sent, later
//     holds are refused.
//   * `agent`: the stream's bound agent id (agent_identity.h). The room
//     keeps each agent to its share of --max_agent_held_calls
//     (WaitRoom::AgentShare); a call beyond it is answered at once, as an
//     Admit would be.
// Thread-safe. Lock order: this object's lock, then the room's, then the
// engine's; `send` runs under this object's lock and must not call back.
// The engine, room (may be null) and clock must outlive every entry.
#ifndef STAGGER_SERVER_SERVICE_AGENT_HELD_CALLS_H_
#define STAGGER_SERVER_SERVICE_AGENT_HELD_CALLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "server/service/wait_room.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::service {

class AgentHeldCall;

class AgentHeldCalls : public std::enable_shared_from_this<AgentHeldCalls> {
 public:
  using Send =
      std::function<void(v1::HeldAnswer, absl::string_view endpoint)>;
  // `answered(decision)` runs for every decision sent (metrics); may be
  // null.
  static std::shared_ptr<AgentHeldCalls> Make(engine::Engine* engine,
                                              WaitRoom* room,
                                              const engine::Clock* clock,
                                              WaitRoom::Answered answered,
                                              Send send,
                                              std::string agent = "");
  ~AgentHeldCalls();

  absl::Status Hold(const v1::HeldAdmit& h);
  void Drop(uint64_t id);
  void Return(absl::string_view endpoint, uint64_t admission);
  void Unsent(const v1::HeldAnswer& answer, absl::string_view endpoint);
  void Close();

  size_t held() const;  // entries not yet answered
  const std::string& agent() const { return agent_; }

 private:
  friend class AgentHeldCall;
  AgentHeldCalls(engine::Engine* engine, WaitRoom* room,
                 const engine::Clock* clock, WaitRoom::Answered answered,
                 Send send, std::string agent);
  // From the room (outside its lock): the call's end.
  void Answered(AgentHeldCall* call, const engine::Decision& d,
                absl::Time now);
  void Forget(AgentHeldCall* call);
  void SendDecision(uint64_t id, absl::string_view endpoint,
                    const engine::Decision& d, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendError(uint64_t id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine* const engine_;
  WaitRoom* const room_;
  const engine::Clock* const clock_;
  const WaitRoom::Answered answered_;
  const std::string agent_;
  mutable absl::Mutex mu_;
  Send send_ ABSL_GUARDED_BY(mu_);  // null once closed
  absl::flat_hash_map<uint64_t, AgentHeldCall*> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_AGENT_HELD_CALLS_H_
