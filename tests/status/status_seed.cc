// stagger_status_seed: puts a running staggerd into the states the status
// page test looks for, over its gRPC API (plaintext, loopback):
//
//   stagger_status_seed ADDRESS seed
//       tracks clear/0..clear/19, then: an OPEN breaker (Admin ForceBreaker,
//       10 min) on kOpenKey, a Retry-After window (a RATE_LIMITED report
//       with retry_after 10 min) on kRetryAfterKey, a pause (Admin Pause,
//       10 min, reason "deploy 42") on kPausedKey, a pause set ahead of
//       traffic on kAheadKey (never tracked), a prefix pause on kPrefix
//       (covering no tracked key) and a disabled endpoint (Admin Disable,
//       reason "gone 410") on kDisabledKey. Prints the six keys (the
//       prefix as it is), one per line, and exits 0; 1 naming the call
//       that failed.
//   stagger_status_seed ADDRESS traffic SECONDS
//       Admits and SUCCESS reports on clear/* (about 40 decisions a
//       second) for SECONDS (1..600), then exits 0: the chart's data. A
//       failed call ends it with 1 (e.g. staggerd stopped).
//
// The keys hold HTML's special characters, so the page must show them as
// text.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace {

using google::protobuf::util::TimeUtil;
using stagger::v1::Admin;
using stagger::v1::RetryCoordinator;

const char kOpenKey[] = "orders/<b>open</b> & \"quoted\"";
const char kRetryAfterKey[] = "pay/<i>rate-limited</i>";
const char kPausedKey[] = "ship/paused 'now'";
const char kAheadKey[] = "ahead/<u>maintenance</u>";
const char kPrefix[] = "partner/<s>all</s>/";
const char kDisabledKey[] = "gone/<em>410</em>";

bool Check(const grpc::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "stagger_status_seed: %s: code %d: %s\n", what,
                 s.error_code(), s.error_message().c_str());
  }
  return s.ok();
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

bool Admit(RetryCoordinator::Stub& stub, const std::string& key) {
  stagger::v1::AdmitRequest req;
  req.set_endpoint(key);
  req.set_attempt(1);
  stagger::v1::AdmitResponse resp;
  return Check(stub.Admit(Context().get(), req, &resp), "Admit");
}

bool Report(RetryCoordinator::Stub& stub, const std::string& key,
            stagger::v1::Outcome outcome, int retry_after_s) {
  stagger::v1::ReportRequest req;
  req.set_endpoint(key);
  req.set_attempt(1);
  req.set_outcome(outcome);
  if (retry_after_s > 0) {
    *req.mutable_retry_after() = TimeUtil::SecondsToDuration(retry_after_s);
  }
  stagger::v1::ReportResponse resp;
  return Check(stub.Report(Context().get(), req, &resp), "Report");
}

int Seed(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = RetryCoordinator::NewStub(channel);
  auto admin = Admin::NewStub(channel);
  for (int i = 0; i < 20; ++i) {
    if (!Admit(*stub, "clear/" + std::to_string(i))) return 1;
  }
  if (!Admit(*stub, kOpenKey) || !Admit(*stub, kPausedKey)) return 1;
  stagger::v1::ForceBreakerRequest force;
  force.set_endpoint(kOpenKey);
  force.set_state(stagger::v1::OPEN);
  *force.mutable_open_for() = TimeUtil::SecondsToDuration(600);
  force.set_reason("status page test");
  stagger::v1::ForceBreakerResponse forced;
  if (!Check(admin->ForceBreaker(Context().get(), force, &forced),
             "ForceBreaker")) {
    return 1;
  }
  if (!Report(*stub, kRetryAfterKey, stagger::v1::RATE_LIMITED, 600)) return 1;
  stagger::v1::PauseRequest pause;
  pause.mutable_target()->set_endpoint(kPausedKey);
  *pause.mutable_duration() = TimeUtil::SecondsToDuration(600);
  pause.set_reason("deploy 42");
  stagger::v1::PauseResponse paused;
  if (!Check(admin->Pause(Context().get(), pause, &paused), "Pause")) return 1;
  pause.mutable_target()->set_endpoint(kAheadKey);
  pause.set_reason("their maintenance");
  if (!Check(admin->Pause(Context().get(), pause, &paused), "Pause ahead")) {
    return 1;
  }
  pause.mutable_target()->set_prefix(kPrefix);
  pause.set_reason("partner migration");
  if (!Check(admin->Pause(Context().get(), pause, &paused), "Pause prefix")) {
    return 1;
  }
  stagger::v1::DisableRequest disable;
  disable.set_endpoint(kDisabledKey);
  disable.set_reason("gone 410");
  stagger::v1::DisableResponse disabled;
  if (!Check(admin->Disable(Context().get(), disable, &disabled), "Disable")) {
    return 1;
  }
  std::printf("%s\n%s\n%s\n%s\n%s\n%s\n", kOpenKey, kRetryAfterKey, kPausedKey,
              kAheadKey, kPrefix, kDisabledKey);
  return 0;
}

int Traffic(const std::shared_ptr<grpc::Channel>& channel, int seconds) {
  auto stub = RetryCoordinator::NewStub(channel);
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    const std::string key = "clear/" + std::to_string(i % 20);
    if (!Admit(*stub, key) ||
        !Report(*stub, key, stagger::v1::SUCCESS, 0)) {
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 3 ? argv[2] : "";
  const int seconds = argc == 4 ? std::atoi(argv[3]) : 0;
  if (!((argc == 3 && mode == "seed") ||
        (argc == 4 && mode == "traffic" && seconds >= 1 && seconds <= 600))) {
    std::fprintf(stderr,
                 "usage: stagger_status_seed ADDRESS seed | "
                 "stagger_status_seed ADDRESS traffic SECONDS (1..600)\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  return mode == "seed" ? Seed(channel) : Traffic(channel, seconds);
}
