#include "server/service/admin_service.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "server/security/authz_processor.h"
#include "server/security/key_fingerprint.h"
#include "server/service/proto_convert.h"
#include "server/service/watch_events.h"

namespace stagger::service {
namespace {

using google::protobuf::util::TimeUtil;
using security::SecurityMetrics;

constexpr size_t kMaxNoteBytes = 256;  // reset / force_breaker reasons
constexpr absl::Duration kMaxForcedOpen = absl::Hours(24);

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx,
                                     const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}


// "endpoint key#..." / "prefix key#...": the target, never its text.
std::string Describe(const engine::Pause& p) {
  return absl::StrCat(p.prefix ? "prefix " : "endpoint ",
                      security::KeyFingerprint(p.target));
}

absl::Status CheckTarget(const v1::PauseTarget& t) {
  if (t.target_case() == v1::PauseTarget::TARGET_NOT_SET) {
    return absl::InvalidArgumentError(
        "target: set endpoint or prefix (exactly one)");
  }
  return absl::OkStatus();
}

// admin.proto, "operation_id": 1..64 bytes of [A-Za-z0-9._:-], or empty
// (then a random one is made up).
absl::StatusOr<std::string> OperationId(const std::string& given) {
  if (given.empty()) {
    absl::BitGen gen;
    return absl::StrFormat("op-%016x", absl::Uniform<uint64_t>(gen));
  }
  const bool ok = given.size() <= 64 &&
                  given.find_first_not_of(
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789._:-") == std::string::npos;
  if (!ok) {
    return absl::InvalidArgumentError(
        "operation_id: 1..64 bytes of A-Z a-z 0-9 . _ : -");
  }
  return given;
}

absl::Status CheckNote(const std::string& reason) {
  if (reason.size() > kMaxNoteBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reason: at most ", kMaxNoteBytes, " bytes, got ", reason.size()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string CallerOf(const grpc::CallbackServerContext* ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  return auth == nullptr ? "unauthenticated" : security::PrincipalOf(*auth);
}

AdminService::AdminService(engine::Engine* engine,
                           security::SecurityMetrics* metrics,
                           const engine::Clock* clock, LogFn log)
    : engine_(engine), metrics_(metrics), clock_(clock), log_(std::move(log)) {}

void AdminService::Audit(const std::string& who, const std::string& what,
                         const std::string& reason) {
  if (!log_) return;
  log_(absl::StrCat("admin: ", who, " ", what,
                    reason.empty() ? "" : absl::StrCat(": \"", reason, "\"")));
}

void AdminService::Changed(const std::string& key, bool prefix) {
  const auto match = [&](absl::string_view k) {
    return prefix ? absl::StartsWith(k, key) : k == key;
  };
  if (waits_ != nullptr) waits_->WakeIf(match);
}

grpc::Status AdminService::DoPause(const v1::PauseRequest& req,
                                   const std::string& who,
                                   v1::PauseResponse* resp) {
  if (absl::Status s = CheckTarget(req.target()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!req.has_duration()) {
    return ToGrpcStatus(absl::InvalidArgumentError("duration: required"));
  }
  absl::StatusOr<std::string> id = OperationId(req.operation_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  const bool prefix = req.target().has_prefix();
  const absl::Duration duration =
      absl::Nanoseconds(TimeUtil::DurationToNanoseconds(req.duration()));
  absl::StatusOr<engine::Pause> p = engine_->pauses().Set(
      prefix ? req.target().prefix() : req.target().endpoint(), prefix,
      duration, req.reason(), who, clock_->Now(), *std::move(id));
  if (!p.ok()) return ToGrpcStatus(p.status());
  Changed(prefix ? req.target().prefix() : req.target().endpoint(), prefix);
  ToProto(*p, resp->mutable_pause());
  if (metrics_) metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kPause);
  Audit(who, absl::StrCat("paused ", Describe(*p), " for ",
                          absl::FormatDuration(duration)),
        p->reason);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoResume(const v1::ResumeRequest& req,
                                    const std::string& who,
                                    v1::ResumeResponse* resp) {
  if (absl::Status s = CheckTarget(req.target()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::StatusOr<std::string> id = OperationId(req.operation_id());
      !id.ok()) {
    return ToGrpcStatus(id.status());
  }
  const bool prefix = req.target().has_prefix();
  absl::StatusOr<engine::Pause> p = engine_->pauses().Remove(
      prefix ? req.target().prefix() : req.target().endpoint(), prefix,
      clock_->Now(), who);
  if (!p.ok()) return ToGrpcStatus(p.status());
  Changed(prefix ? req.target().prefix() : req.target().endpoint(), prefix);
  ToProto(*p, resp->mutable_resumed());
  if (metrics_) metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kResume);
  Audit(who, absl::StrCat("resumed ", Describe(*p)), "");
  return grpc::Status::OK;
}

grpc::Status AdminService::DoListPauses(v1::ListPausesResponse* resp) {
  for (const engine::Pause& p : engine_->pauses().List(clock_->Now())) {
    ToProto(p, resp->add_pauses());
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::DoResetEndpoint(const v1::ResetEndpointRequest& req,
                                           const std::string& who) {
  if (absl::Status s = CheckNote(req.reason()); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = engine_->ResetEndpoint(req.endpoint()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  Changed(req.endpoint(), /*prefix=*/false);
  if (metrics_) metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kReset);
  Audit(who,
        absl::StrCat("reset endpoint ", security::KeyFingerprint(req.endpoint())),
        req.reason());
  return grpc::Status::OK;
}

grpc::Status AdminService::DoForceBreaker(const v1::ForceBreakerRequest& req,
                                          const std::string& who,
                                          v1::ForceBreakerResponse* resp) {
  if (absl::Status s = CheckNote(req.reason()); !s.ok()) return ToGrpcStatus(s);
  absl::Duration open_for = absl::ZeroDuration();
  if (req.state() == v1::OPEN) {
    open_for = absl::Nanoseconds(
        req.has_open_for() ? TimeUtil::DurationToNanoseconds(req.open_for()) : 0);
    if (open_for <= absl::ZeroDuration() || open_for > kMaxForcedOpen) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "open_for: must be > 0 and <= ", absl::FormatDuration(kMaxForcedOpen),
          " to force OPEN, got ", absl::FormatDuration(open_for))));
    }
  } else if (req.state() != v1::CLOSED) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("state: must be OPEN or CLOSED, got ",
                     v1::BreakerState_Name(req.state()))));
  }
  absl::StatusOr<engine::EndpointSnapshot> snap = engine_->ForceBreaker(
      req.endpoint(),
      req.state() == v1::OPEN ? engine::BreakerState::kOpen
                              : engine::BreakerState::kClosed,
      open_for);
  if (!snap.ok()) return ToGrpcStatus(snap.status());
  Changed(req.endpoint(), /*prefix=*/false);
  ToProto(*snap, resp->mutable_state());
  if (metrics_) {
    metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kForceBreaker);
  }
  Audit(who,
        absl::StrCat("forced the breaker of endpoint ",
                     security::KeyFingerprint(req.endpoint()), " ",
                     v1::BreakerState_Name(req.state()),
                     req.state() == v1::OPEN
                         ? absl::StrCat(" for ", absl::FormatDuration(open_for))
                         : ""),
        req.reason());
  return grpc::Status::OK;
}

grpc::Status AdminService::DoDisable(const v1::DisableRequest& req,
                                     const std::string& who,
                                     v1::DisableResponse* resp) {
  if (req.reason().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("reason: required"));
  }
  if (absl::Status s = CheckNote(req.reason()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::string> id = OperationId(req.operation_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  engine::Disable d;
  d.reason = req.reason();
  d.by = who;
  d.operation_id = *std::move(id);
  if (absl::Status s = engine_->Disable(req.endpoint(), std::move(d));
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  Changed(req.endpoint(), /*prefix=*/false);
  if (std::optional<engine::Disable> now =
          engine_->disables().Find(req.endpoint())) {
    ToProto(*now, resp->mutable_disabled());
  }
  if (metrics_) {
    metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kDisable);
  }
  Audit(who,
        absl::StrCat("disabled endpoint ",
                     security::KeyFingerprint(req.endpoint())),
        req.reason());
  return grpc::Status::OK;
}

grpc::Status AdminService::DoEnable(const v1::EnableRequest& req,
                                    const std::string& who,
                                    v1::EnableResponse* resp) {
  if (absl::Status s = CheckNote(req.reason()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::string> id = OperationId(req.operation_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  engine::Enable e;
  e.by = who;
  e.reason = req.reason();
  e.operation_id = *std::move(id);
  absl::StatusOr<engine::Disable> ended = engine_->Enable(req.endpoint(), e);
  if (!ended.ok()) return ToGrpcStatus(ended.status());
  Changed(req.endpoint(), /*prefix=*/false);
  ToProto(*ended, resp->mutable_ended());
  if (metrics_) {
    metrics_->RecordAdminAction(SecurityMetrics::AdminAction::kEnable);
  }
  Audit(who,
        absl::StrCat("enabled endpoint ",
                     security::KeyFingerprint(req.endpoint())),
        req.reason());
  return grpc::Status::OK;
}

grpc::Status AdminService::DoListDisabled(v1::ListDisabledResponse* resp) {
  for (const engine::Disable& d : engine_->disables().List()) {
    v1::DisabledEndpoint* out = resp->add_endpoints();
    out->set_endpoint(d.endpoint);
    ToProto(d, out->mutable_disabled());
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AdminService::Disable(
    grpc::CallbackServerContext* ctx, const v1::DisableRequest* req,
    v1::DisableResponse* resp) {
  return FinishWith(ctx, DoDisable(*req, CallerOf(ctx), resp));
}

grpc::ServerUnaryReactor* AdminService::Enable(grpc::CallbackServerContext* ctx,
                                               const v1::EnableRequest* req,
                                               v1::EnableResponse* resp) {
  return FinishWith(ctx, DoEnable(*req, CallerOf(ctx), resp));
}

grpc::ServerUnaryReactor* AdminService::ListDisabled(
    grpc::CallbackServerContext* ctx, const v1::ListDisabledRequest*,
    v1::ListDisabledResponse* resp) {
  return FinishWith(ctx, DoListDisabled(resp));
}

grpc::ServerUnaryReactor* AdminService::Pause(grpc::CallbackServerContext* ctx,
                                              const v1::PauseRequest* req,
                                              v1::PauseResponse* resp) {
  return FinishWith(ctx, DoPause(*req, CallerOf(ctx), resp));
}

grpc::ServerUnaryReactor* AdminService::Resume(grpc::CallbackServerContext* ctx,
                                               const v1::ResumeRequest* req,
                                               v1::ResumeResponse* resp) {
  return FinishWith(ctx, DoResume(*req, CallerOf(ctx), resp));
}

grpc::ServerUnaryReactor* AdminService::ListPauses(
    grpc::CallbackServerContext* ctx, const v1::ListPausesRequest*,
    v1::ListPausesResponse* resp) {
  return FinishWith(ctx, DoListPauses(resp));
}

grpc::ServerUnaryReactor* AdminService::ResetEndpoint(
    grpc::CallbackServerContext* ctx, const v1::ResetEndpointRequest* req,
    v1::ResetEndpointResponse*) {
  return FinishWith(ctx, DoResetEndpoint(*req, CallerOf(ctx)));
}

grpc::ServerUnaryReactor* AdminService::ForceBreaker(
    grpc::CallbackServerContext* ctx, const v1::ForceBreakerRequest* req,
    v1::ForceBreakerResponse* resp) {
  return FinishWith(ctx, DoForceBreaker(*req, CallerOf(ctx), resp));
}

}  // namespace stagger::service
