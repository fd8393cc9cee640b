// SyncService: stagger.v1.AgentSync on staggerd (proto/stagger/v1/sync.proto,
// protocol 2), on the callback API with raw bytes: one reactor per agent
// stream, no thread per stream.
//
// A stream's messages up are parsed here (bytes that are no SyncUp end it
// with INVALID_ARGUMENT naming the type) and converted (core/wire/
// sync_wire.h: a bad field ends it with INVALID_ARGUMENT naming the field).
// The first must carry a hello: SyncHub::Open answers it with the set's
// snapshot; every later message is SyncHub::Receive's (renewal, applied
// counts). The hub's pushes (shared bytes) go out between those answers, in
// order. Writes go out one at a time.
//
// Bounded: a stream that falls behind (more than kMaxBacklogBytes queued)
// has its queued pushes dropped and gets a snapshot instead; one that falls
// behind again before that snapshot went out is cancelled (a peer that
// does not read would never take a status). Answers to held calls are never
// dropped for a backlog. Each message up gets an answer of its own (its
// renewal); a peer that sends but does not read would queue those without
// end, so a stream with more than kMaxQueuedAnswers of them queued is
// cancelled too (RESOURCE_EXHAUSTED). A reading agent has at most a few:
// it sends one message per flush.
//
// Answers at a stream's end. An OK end (the drain) writes every answer
// queued before its status. After any other end (an error, a cancel, a
// failed write) the answers not yet handed to gRPC are not sent: any probe
// one carried goes back to the engine at once (AgentHeldCalls::Return), so
// the next waiter gets it. An answer handed to gRPC whose peer never read
// it (the agent died) keeps its probe until the breaker's probe_timeout.
//
// Identity: the hello's agent_id is bound to the peer's identity
// (agent_identity.h: under mutual TLS, "<principal>|<agent_id>"), and the
// hub knows the stream's agent by that bound id: its count seqs, lease
// records and share of held calls. So a certificate cannot act as another
// certificate's agent, whatever agent_id it sends.
//
// Held calls (SyncUp.holds, drops, returns) go to the stream's own
// AgentHeldCalls, made by `held_calls` with the bound id when the hello
// came (null: a stream that sends holds ends with UNIMPLEMENTED); their
// answers go down several to a message. The stream's end closes them. Every message in and out is counted
// (`count(direction)`, may be null). The hub's Shutdown (drain) ends every
// stream with OK.
// Thread-safe. `hub` must outlive the service and every stream.
#ifndef STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_
#define STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "server/service/agent_held_calls.h"
#include "server/service/sync_hub.h"
#include "stagger/v1/sync.grpc.pb.h"

namespace stagger::service {

using RawSyncService =
    v1::AgentSync::WithRawCallbackMethod_Sync<v1::AgentSync::Service>;

class SyncService final : public RawSyncService {
 public:
  // A stream's queued pushes beyond this: it fell behind (see above).
  static constexpr size_t kMaxBacklogBytes = size_t{8} << 20;  // 8 MiB
  // A stream's queued answers to its own messages beyond this: its peer
  // sends but does not read (see above).
  static constexpr size_t kMaxQueuedAnswers = 256;

  enum class Direction { kIn, kOut };
  using Counter = std::function<void(Direction)>;
  using HeldCallsFactory = std::function<std::shared_ptr<AgentHeldCalls>(
      AgentHeldCalls::Send send, const std::string& agent)>;
  SyncService(SyncHub* hub, Counter count,
              size_t max_backlog_bytes = kMaxBacklogBytes);
  // Before the server starts.
  void set_held_calls(HeldCallsFactory make) { held_calls_ = std::move(make); }

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Sync(
      grpc::CallbackServerContext* ctx) override;

 private:
  SyncHub* const hub_;
  const Counter count_;
  const size_t max_backlog_bytes_;
  HeldCallsFactory held_calls_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_SYNC_SERVICE_H_
