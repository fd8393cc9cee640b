// AdminService: the gRPC adapter for stagger.v1.Admin, the operators' API
// (proto/stagger/v1/admin.proto): pause and resume endpoints or key
// prefixes (engine::PauseTable, consulted first by every decision), list
// pauses, reset an endpoint's state, force its breaker open or closed,
// disable and enable an endpoint (engine::Engine::Disable), list the
// disabled ones. Pause, Resume, Disable and Enable take an operation id
// (admin.proto) that the watch's events of the command carry; a pause
// keeps it as its pause_id.
//
// Every action that changes state is logged on one line with the caller's
// identity (security::PrincipalOf: the client certificate's URI SAN, DNS
// SAN or subject; "unauthenticated" on a plaintext port), the action, the
// target by fingerprint (security::KeyFingerprint: never the key) and the
// reason, and counted (stagger_admin_actions_total{action}). Refusals are
// INVALID_ARGUMENT naming the field, NOT_FOUND, or RESOURCE_EXHAUSTED (too
// many pauses); they change nothing. Who may call it at all is the
// authorization policy's business (its own service name, so a policy can
// give it to admins only).
//
// Thread-safe. `engine`, `metrics` (nullable), `clock` must outlive it.
#ifndef STAGGER_SERVER_SERVICE_ADMIN_SERVICE_H_
#define STAGGER_SERVER_SERVICE_ADMIN_SERVICE_H_

#include <functional>
#include <string>

#include "grpcpp/grpcpp.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "server/security/security_metrics.h"
#include "server/service/wait_room.h"
#include "stagger/v1/admin.grpc.pb.h"

namespace stagger::service {

class AdminService final : public v1::Admin::CallbackService {
 public:
  using LogFn = std::function<void(const std::string&)>;
  AdminService(engine::Engine* engine, security::SecurityMetrics* metrics,
               const engine::Clock* clock, LogFn log);
  // Waiting admission: the same actions (and a resume) let the waiting
  // calls of what they touched be looked at again. Set before the server
  // starts.
  void set_wait_room(WaitRoom* room) { waits_ = room; }

  grpc::ServerUnaryReactor* Pause(grpc::CallbackServerContext* ctx,
                                  const v1::PauseRequest* req,
                                  v1::PauseResponse* resp) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* ctx,
                                   const v1::ResumeRequest* req,
                                   v1::ResumeResponse* resp) override;
  grpc::ServerUnaryReactor* ListPauses(grpc::CallbackServerContext* ctx,
                                       const v1::ListPausesRequest* req,
                                       v1::ListPausesResponse* resp) override;
  grpc::ServerUnaryReactor* ResetEndpoint(
      grpc::CallbackServerContext* ctx, const v1::ResetEndpointRequest* req,
      v1::ResetEndpointResponse* resp) override;
  grpc::ServerUnaryReactor* ForceBreaker(grpc::CallbackServerContext* ctx,
                                         const v1::ForceBreakerRequest* req,
                                         v1::ForceBreakerResponse* resp) override;
  grpc::ServerUnaryReactor* Disable(grpc::CallbackServerContext* ctx,
                                    const v1::DisableRequest* req,
                                    v1::DisableResponse* resp) override;
  grpc::ServerUnaryReactor* Enable(grpc::CallbackServerContext* ctx,
                                   const v1::EnableRequest* req,
                                   v1::EnableResponse* resp) override;
  grpc::ServerUnaryReactor* ListDisabled(
      grpc::CallbackServerContext* ctx, const v1::ListDisabledRequest* req,
      v1::ListDisabledResponse* resp) override;

  // The handlers' logic; `who` is the caller's identity.
  grpc::Status DoPause(const v1::PauseRequest& req, const std::string& who,
                       v1::PauseResponse* resp);
  grpc::Status DoResume(const v1::ResumeRequest& req, const std::string& who,
                        v1::ResumeResponse* resp);
  grpc::Status DoListPauses(v1::ListPausesResponse* resp);
  grpc::Status DoResetEndpoint(const v1::ResetEndpointRequest& req,
                               const std::string& who);
  grpc::Status DoForceBreaker(const v1::ForceBreakerRequest& req,
                              const std::string& who,
                              v1::ForceBreakerResponse* resp);
  grpc::Status DoDisable(const v1::DisableRequest& req, const std::string& who,
                         v1::DisableResponse* resp);
  grpc::Status DoEnable(const v1::EnableRequest& req, const std::string& who,
                        v1::EnableResponse* resp);
  grpc::Status DoListDisabled(v1::ListDisabledResponse* resp);

 private:
  void Audit(const std::string& who, const std::string& what,
             const std::string& reason);

  engine::Engine* engine_;
  security::SecurityMetrics* metrics_;
  WaitRoom* waits_ = nullptr;
  // `key`, or every key starting with it, changed: its waiting calls are
  // looked at. (Agents hear of it through the lease set, which follows the
  // engine's pauses and conditions.)
  void Changed(const std::string& key, bool prefix);
  const engine::Clock* clock_;
  LogFn log_;
};

// The caller's identity for the audit log.
std::string CallerOf(const grpc::CallbackServerContext* ctx);

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_ADMIN_SERVICE_H_
