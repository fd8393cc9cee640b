// Fuzz target sync: the lease stream (proto/stagger/v1/sync.proto) from
// both ends, on a FakeClock: agents' messages through the coordinator's
// LeaseHub into a real Engine, failure reports that revoke, and the
// coordinator's answers through the agent's LeaseBook.
//
// Input: a sequence of records, each
//   [op: 1 byte] [clock advance: 2 bytes, x 10 ms] [length: 2 bytes] [bytes]
// op % 5: a SyncUp from agent A or agent B (bytes that do not parse are
// skipped, as gRPC refuses them), a failure report on the key the bytes
// name (then the hub's OnEndpointChanged, as CoordinatorService calls it),
// a SyncDown applied to agent A's book (grants and revokes, then a local
// Admit and a SUCCESS Report on each endpoint it names), or a ledger sweep.
// The corpus is made by tests/fuzz/make_corpus.py.
//
// Invariants:
//   - Handle answers a SyncDown or INVALID_ARGUMENT with a message;
//   - every grant is for an endpoint the engine says is clear at that
//     moment, with a ttl of the hub's and an allowance >= kMinAllowance;
//   - applied_seq never goes backwards for an agent;
//   - the book answers locally only first attempts (PROCEED,
//     INITIAL_JITTER, admission kLocalAdmission) and successes (DONE).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "google/protobuf/stubs/logging.h"
#include "core/engine/endpoint_key.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/lease_book.h"
#include "core/wire/sync_wire.h"
#include "server/service/lease_hub.h"
#include "stagger/v1/sync.pb.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/testing/fake_clock.h"

namespace stagger::fuzz {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(2);

engine::EngineConfig SmallConfig() {
  engine::EngineConfig c;
  c.limits.max_endpoints = 8;
  c.limits.max_key_bytes = 64;
  c.default_policy.breaker.consecutive_failures = 2;
  c.default_policy.breaker.open_base = absl::Seconds(1);
  return c;
}

class Session {
 public:
  Session()
      : random_(11),
        engine_(SmallConfig(), &clock_, &random_),
        hub_(&engine_, lease::LeaseLedger::Options{kTtl}, nullptr, &clock_,
             nullptr) {
    engine_.set_probe_hold([this](absl::string_view k, absl::Time now) {
      return hub_.ProbeHeld(k, now);
    });
  }

  void Run(ByteReader& in) {
    while (!in.empty()) {
      const uint8_t op = in.Take<uint8_t>() % 5;
      clock_.Advance(absl::Milliseconds(10) * in.Take<uint16_t>());
      const std::string bytes = in.Rest(in.Take<uint16_t>());
      Step(op, bytes);
    }
  }

 private:
  void Step(uint8_t op, const std::string& bytes) {
    switch (op) {
      case 0:
      case 1:
        return Up(op == 0 ? lease::AgentKey{"a", 1} : lease::AgentKey{"b", 2},
                  bytes);
      case 2: {
        if (!engine::ValidateEndpointKey(bytes, 64).ok()) return;
        engine::ReportInput in;
        in.endpoint = bytes;
        in.outcome = engine::Outcome::kRetryableFailure;
        FUZZ_CHECK(engine_.Report(in).ok());
        hub_.OnEndpointChanged(bytes);
        return;
      }
      case 3:
        return Down(bytes);
      default:
        hub_.Sweep();
        return;
    }
  }

  void Up(const lease::AgentKey& agent, const std::string& bytes) {
    v1::SyncUp up;
    if (!up.ParseFromString(bytes)) return;
    absl::StatusOr<v1::SyncDown> down = hub_.Handle(agent, up);
    if (!down.ok()) {
      FUZZ_CHECK(down.status().code() == absl::StatusCode::kInvalidArgument);
      FUZZ_CHECK(!down.status().message().empty());
      return;
    }
    for (const v1::LeaseGrant& g : down->grants()) {
      FUZZ_CHECK(engine_.LeaseTermsFor(g.endpoint()).clear)
          << "a lease on an endpoint that is not clear";
      FUZZ_CHECK(g.ttl().seconds() == absl::ToInt64Seconds(kTtl));
      FUZZ_CHECK(g.allowance() >= lease::LeaseLedger::kMinAllowance);
    }
    uint64_t& last = applied_[agent.id];
    if (down->applied_seq() != 0) {
      FUZZ_CHECK(down->applied_seq() == up.counts().seq());
      last = std::max(last, down->applied_seq());
    }
  }

  void Down(const std::string& bytes) {
    v1::SyncDown down;
    if (!down.ParseFromString(bytes)) return;
    for (const v1::LeaseGrant& g : down.grants()) {
      absl::StatusOr<lease::LeaseGrant> grant = wire::FromProto(g);
      if (grant.ok()) book_.OnGrant(*grant, clock_.Now());
    }
    for (const v1::LeaseRevoke& r : down.revokes()) {
      book_.OnRevoke(wire::FromProto(r));
    }
    for (const v1::LeaseGrant& g : down.grants()) LocalCalls(g.endpoint());
    book_.TakeOutgoing(clock_.Now(), /*flush=*/true);
  }

  void LocalCalls(const std::string& endpoint) {
    engine::AdmitInput admit;
    admit.endpoint = endpoint;
    if (std::optional<engine::Decision> d =
            book_.Admit(admit, clock_.Now(), random_.Get())) {
      FUZZ_CHECK(d->verdict == engine::Verdict::kProceed &&
                 d->reason == engine::Reason::kInitialJitter &&
                 d->admission == engine::kLocalAdmission);
    }
    engine::ReportInput report;
    report.endpoint = endpoint;
    if (std::optional<engine::Decision> d = book_.Report(report, clock_.Now())) {
      FUZZ_CHECK(d->verdict == engine::Verdict::kDone);
    }
  }

  testing::FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  service::LeaseHub hub_;
  lease::LeaseBook book_;
  std::map<std::string, uint64_t> applied_;
};

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every non-UTF-8 string it parses: expected here.
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
