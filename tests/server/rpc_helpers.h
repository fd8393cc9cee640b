// One-line wrappers over the generated stubs the server tests call: the
// coordinator's Admit / Report / GetEndpoint and grpc.health.v1 Check. Each
// call gets a deadline (default 10 s: a loaded machine must not turn a slow
// answer into a failure) and returns the grpc::Status; the answer goes to
// an out-parameter.
#ifndef STAGGER_TESTS_SERVER_RPC_HELPERS_H_
#define STAGGER_TESTS_SERVER_RPC_HELPERS_H_

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::server_test {

inline constexpr absl::Duration kRpcDeadline = absl::Seconds(10);

using Coordinator = v1::RetryCoordinator::Stub;
using Health = grpc::health::v1::Health::Stub;
using grpc::health::v1::HealthCheckResponse;

inline std::shared_ptr<grpc::Channel> Channel(const std::string& target) {
  return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
}

inline void SetDeadline(grpc::ClientContext& ctx, absl::Duration d) {
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(d));
}

inline grpc::Status Admit(Coordinator& stub, const std::string& endpoint,
                          int attempt, v1::Decision* out,
                          absl::Duration deadline = kRpcDeadline) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, deadline);
  v1::AdmitRequest req;
  req.set_endpoint(endpoint);
  req.set_attempt(attempt);
  v1::AdmitResponse resp;
  grpc::Status s = stub.Admit(&ctx, req, &resp);
  if (out != nullptr) *out = resp.decision();
  return s;
}

inline grpc::Status Report(Coordinator& stub, const std::string& endpoint,
                           int attempt, v1::Outcome outcome, v1::Decision* out,
                           absl::Duration deadline = kRpcDeadline) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, deadline);
  v1::ReportRequest req;
  req.set_endpoint(endpoint);
  req.set_attempt(attempt);
  req.set_outcome(outcome);
  v1::ReportResponse resp;
  grpc::Status s = stub.Report(&ctx, req, &resp);
  if (out != nullptr) *out = resp.decision();
  return s;
}

inline grpc::Status GetEndpoint(Coordinator& stub, const std::string& endpoint,
                                v1::EndpointState* out) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kRpcDeadline);
  v1::GetEndpointRequest req;
  req.set_endpoint(endpoint);
  v1::GetEndpointResponse resp;
  grpc::Status s = stub.GetEndpoint(&ctx, req, &resp);
  if (out != nullptr) *out = resp.state();
  return s;
}

inline grpc::Status HealthCheck(Health& stub, const std::string& service,
                                HealthCheckResponse::ServingStatus* out,
                                absl::Duration deadline = kRpcDeadline) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, deadline);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  grpc::Status s = stub.Check(&ctx, req, &resp);
  if (out != nullptr) *out = resp.status();
  return s;
}

// "verdict/reason" for assertion messages, e.g. "GIVE_UP/ATTEMPTS_EXHAUSTED".
inline std::string Describe(const v1::Decision& d) {
  return v1::Verdict_Name(d.verdict()) + "/" + v1::Reason_Name(d.reason());
}

}  // namespace stagger::server_test

namespace grpc {
// So that gtest prints a failed call's status instead of its bytes.
inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << "grpc::Status(" << s.error_code() << ", \"" << s.error_message()
            << "\")";
}
}  // namespace grpc

#endif  // STAGGER_TESTS_SERVER_RPC_HELPERS_H_
