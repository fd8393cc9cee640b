// SyncService: stagger.v1.AgentSync on staggerd (proto/stagger/v1/sync.proto),
// on the callback API: one reactor per agent stream, no thread per stream.
//
// A stream's first message must carry a hello (agent_id 1..256 bytes,
// incarnation != 0); then every message up is handed to the LeaseHub in
// order and its answer (applied_seq, grants) is written back; revokes the
// hub pushes are written at once, between answers. Writes go out one at a
// time, in order. A bad message ends the stream with INVALID_ARGUMENT
// naming the field; the hub's Shutdown (drain) ends it with OK. Every
// message in and out is counted (`count(direction)`, may be null).
// Held calls (SyncUp.holds, drops, returns) go to the stream's own
// AgentHeldCalls, made by `held_calls` (null: a stream that sends holds
// ends with UNIMPLEMENTED); their answers go down between the others,
// several to a message. The stream's end closes them.
// Thread-safe. `hub` must outlive the service and every stream.
#ifndef STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_
#define STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_

#include <functional>
#include <memory>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "server/service/agent_held_calls.h"
#include "server/service/lease_hub.h"
#include "stagger/v1/sync.grpc.pb.h"

namespace stagger::service {

class SyncService final : public v1::AgentSync::CallbackService {
 public:
  enum class Direction { kIn, kOut };
  using Counter = std::function<void(Direction)>;
  using HeldCallsFactory =
      std::function<std::shared_ptr<AgentHeldCalls>(AgentHeldCalls::Send)>;
  SyncService(LeaseHub* hub, Counter count);
  // Before the server starts.
  void set_held_calls(HeldCallsFactory make) { held_calls_ = std::move(make); }

  grpc::ServerBidiReactor<v1::SyncUp, v1::SyncDown>* Sync(
      grpc::CallbackServerContext* ctx) override;

 private:
  LeaseHub* const hub_;
  const Counter count_;
  HeldCallsFactory held_calls_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_
