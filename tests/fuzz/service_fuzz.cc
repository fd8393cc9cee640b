// Fuzz target service: every RPC's request bytes through the real
// CoordinatorService handlers (the Do* functions the callback reactors
// call) into a real Engine on a FakeClock, one fresh engine per input.
//
// Input: a sequence of records, each
//   [op: 1 byte] [clock advance: 2 bytes, x 10 ms] [length: 2 bytes] [bytes]
// op % 7: Admit, Report, AdmitBatch, ReportBatch, GetEndpoint, ListEndpoints
// (the bytes are that RPC's request message, parsed as gRPC would; bytes
// that do not parse are skipped, as gRPC refuses them before the handler),
// or an idle-eviction sweep. The policy is small on purpose (4 tracked
// endpoints, 2 s idle eviction, an override) so that the table fills,
// evicts and switches policies within a few records. The corpus is made by
// tests/fuzz/make_corpus.py.
//
// Invariants (fuzz_support.h's DecisionBounds for each decision, plus):
//   - a handler answers OK or INVALID_ARGUMENT with a message (NOT_FOUND
//     with a message for GetEndpoint of an untracked endpoint), nothing else;
//   - OK decision RPCs carry one decision per request item, each with a
//     known verdict and reason, defer_for == defer_until - now;
//   - tracked endpoints never exceed limits.max_endpoints (engine Stats and
//     ListEndpoints' total_tracked agree).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/grpcpp.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "server/service/coordinator_service.h"
#include "stagger/v1/coordinator.pb.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/testing/fake_clock.h"

namespace stagger::fuzz {
namespace {

engine::EngineConfig SmallConfig() {
  engine::EngineConfig c;
  c.limits.max_endpoints = 4;
  c.limits.idle_eviction = absl::Seconds(2);
  c.limits.max_batch_size = 8;
  c.limits.max_key_bytes = 64;
  c.default_policy.breaker.consecutive_failures = 2;
  c.default_policy.breaker.open_base = absl::Seconds(1);
  engine::PolicyOverride o;
  o.pattern = "b";
  o.policy = c.default_policy;
  o.policy.backoff.kind = engine::BackoffKind::kExponential;
  o.policy.backoff.max_attempts = 4;
  o.policy.backoff.horizon = absl::Seconds(30);
  o.policy.deferral.release_rate_per_second = 2;
  c.overrides.push_back(o);
  return c;
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}
absl::Duration ToDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

class Session {
 public:
  Session()
      : config_(SmallConfig()),
        random_(7),
        engine_(config_, &clock_, &random_),
        service_(&engine_, nullptr, &clock_) {
    bounds_.Add(config_);
  }

  void Run(ByteReader& in) {
    while (!in.empty()) {
      const uint8_t op = in.Take<uint8_t>() % 7;
      clock_.Advance(absl::Milliseconds(10) * in.Take<uint16_t>());
      const std::string bytes = in.Rest(in.Take<uint16_t>());
      Call(op, bytes);
      CheckTracked();
    }
  }

 private:
  void Call(uint8_t op, const std::string& bytes) {
    switch (op) {
      case 0: {
        v1::AdmitRequest req;
        v1::AdmitResponse resp;
        if (!req.ParseFromString(bytes)) return;
        if (Answered(service_.DoAdmit(req, &resp))) {
          CheckAdmit(req, resp.decision());
        }
        return;
      }
      case 1: {
        v1::ReportRequest req;
        v1::ReportResponse resp;
        if (!req.ParseFromString(bytes)) return;
        if (Answered(service_.DoReport(req, &resp))) {
          CheckReport(req, resp.decision());
        }
        return;
      }
      case 2: {
        v1::AdmitBatchRequest req;
        v1::AdmitBatchResponse resp;
        if (!req.ParseFromString(bytes)) return;
        if (!Answered(service_.DoAdmitBatch(req, &resp))) return;
        FUZZ_CHECK(resp.decisions_size() == req.items_size());
        for (int i = 0; i < req.items_size(); ++i) {
          CheckAdmit(req.items(i), resp.decisions(i));
        }
        return;
      }
      case 3: {
        v1::ReportBatchRequest req;
        v1::ReportBatchResponse resp;
        if (!req.ParseFromString(bytes)) return;
        if (!Answered(service_.DoReportBatch(req, &resp))) return;
        FUZZ_CHECK(resp.decisions_size() == req.items_size());
        for (int i = 0; i < req.items_size(); ++i) {
          CheckReport(req.items(i), resp.decisions(i));
        }
        return;
      }
      case 4: {
        v1::GetEndpointRequest req;
        v1::GetEndpointResponse resp;
        if (!req.ParseFromString(bytes)) return;
        const grpc::Status s = service_.DoGetEndpoint(req, &resp);
        if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
          FUZZ_CHECK(!s.error_message().empty());
          return;
        }
        if (Answered(s)) FUZZ_CHECK(resp.state().endpoint() == req.endpoint());
        return;
      }
      case 5: {
        v1::ListEndpointsRequest req;
        v1::ListEndpointsResponse resp;
        if (!req.ParseFromString(bytes)) return;
        if (!Answered(service_.DoListEndpoints(req, &resp))) return;
        FUZZ_CHECK(resp.total_tracked() == engine_.Stats().tracked);
        FUZZ_CHECK(resp.endpoints_size() <= CoordinatorPageMax());
        return;
      }
      default:
        engine_.EvictIdle();
        return;
    }
  }

  static int CoordinatorPageMax() {
    return service::CoordinatorService::kMaxPageSize;
  }

  // OK -> true; INVALID_ARGUMENT with a message -> false; else a failure.
  static bool Answered(const grpc::Status& s) {
    if (s.ok()) return true;
    FUZZ_CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << "status " << s.error_code() << ": " << s.error_message();
    FUZZ_CHECK(!s.error_message().empty()) << "INVALID_ARGUMENT, no message";
    return false;
  }

  void CheckAdmit(const v1::AdmitRequest& req, const v1::Decision& d) {
    Check(d, req.has_deadline() ? ToTime(req.deadline()) : absl::InfiniteFuture(),
          req.attempt());
  }
  void CheckReport(const v1::ReportRequest& req, const v1::Decision& d) {
    const bool final_answer =
        req.outcome() == v1::SUCCESS || req.outcome() == v1::PERMANENT_FAILURE;
    Check(d, req.has_deadline() ? ToTime(req.deadline()) : absl::InfiniteFuture(),
          final_answer ? req.attempt() : req.attempt() + 1);
  }

  void Check(const v1::Decision& p, absl::Time deadline, int attempt) {
    FUZZ_CHECK(p.verdict() >= 1 && p.verdict() <= 4) << p.verdict();
    FUZZ_CHECK(p.reason() >= 1 && p.reason() <= engine::kMaxReason)
        << p.reason();
    const absl::Time now = clock_.Now();
    engine::Decision d;
    d.verdict = static_cast<engine::Verdict>(p.verdict());
    d.reason = static_cast<engine::Reason>(p.reason());
    d.attempt = p.attempt();
    d.delay = ToDuration(p.delay());
    if (d.verdict == engine::Verdict::kDefer) {
      FUZZ_CHECK(p.has_defer_until() && p.has_defer_for());
      d.defer_until = ToTime(p.defer_until());
      FUZZ_CHECK(ToDuration(p.defer_for()) == d.defer_until - now)
          << "defer_for " << ToDuration(p.defer_for()) << " vs defer_until "
          << (d.defer_until - now) << " from now";
    }
    bounds_.Check(d, now, deadline, attempt);
  }

  void CheckTracked() {
    const int64_t tracked = engine_.Stats().tracked;
    FUZZ_CHECK(tracked <= config_.limits.max_endpoints)
        << tracked << " tracked, max_endpoints " << config_.limits.max_endpoints;
  }

  const engine::EngineConfig config_;
  testing::FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  service::CoordinatorService service_;
  DecisionBounds bounds_;
};

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every non-UTF-8 string it parses or writes: expected
  // here, and noise (and time) in the fuzzer's output.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  stagger::fuzz::ByteReader in(data, size);
  stagger::fuzz::Session session;
  session.Run(in);
  return 0;
}
