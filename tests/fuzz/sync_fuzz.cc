// Fuzz target sync: the lease stream (proto/stagger/v1/sync.proto,
// protocol 2) from both ends, on fake clocks: messages up, as bytes,
// through the wire conversion into a replica's ReplicaSync beside a real
// Engine; failure reports that put keys in its not-clear set; its pushes;
// and messages down, as bytes, into an agent's AgentLink.
//
// Input: a sequence of records, each
//   [op: 1 byte] [clock advance: 2 bytes, x 10 ms] [length: 2 bytes] [bytes]
// op % 5: a SyncUp on stream A or stream B (opened by the first message
// that carries a hello; bytes that do not parse are skipped, as gRPC
// refuses them), a failure report on the key the bytes name, a SyncDown
// applied to the agent's link (then a local Admit and a SUCCESS Report on
// the key the bytes name), or the replica's Tick (its push goes to the
// agent's link). The corpus is made by tests/fuzz/make_corpus.py.
//
// Invariants:
//   - the wire conversion and the replica answer or refuse with a message
//     (INVALID_ARGUMENT, or FAILED_PRECONDITION for a protocol or a gap);
//   - applied_seq never goes backwards on a stream;
//   - the agent answers locally only first attempts (PROCEED,
//     INITIAL_JITTER, admission kLocalAdmission) and successes (DONE), and
//     never a key its copy of the set covers.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/random/random.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/logging.h"
#include "core/engine/key_validation.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/agent_link.h"
#include "core/lease/replica_sync.h"
#include "core/wire/sync_wire.h"
#include "stagger/v1/sync.pb.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/testing/fake_clock.h"

namespace stagger::fuzz {
namespace {

engine::EngineConfig SmallConfig() {
  engine::EngineConfig c;
  c.limits.max_endpoints = 8;
  c.limits.max_key_bytes = 64;
  c.default_policy.breaker.consecutive_failures = 2;
  c.default_policy.breaker.open_base = absl::Seconds(1);
  c.default_policy.breaker.probe_timeout = absl::Seconds(1);
  return c;
}

lease::ReplicaSync::Options SyncOptions() {
  lease::ReplicaSync::Options o;
  o.ttl = absl::Seconds(2);
  o.incarnation = 7;
  return o;
}

lease::AgentLink::Options LinkOptions() {
  lease::AgentLink::Options o;
  o.agent_id = "a";
  o.incarnation = 1;
  o.members = {"stagger-0"};
  return o;
}

class Session {
 public:
  Session()
      : random_(11),
        engine_(SmallConfig(), &clock_, &random_),
        replica_(SyncOptions(), &engine_, &clock_),
        link_(LinkOptions()) {
    replica_.AttachToEngine();
    link_.OnOpen(clock_.Now());
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
        return Up(op, bytes);
      case 2: {
        if (!engine::ValidateEndpointKey(bytes, 64).ok()) return;
        engine::ReportInput in;
        in.endpoint = bytes;
        in.outcome = engine::Outcome::kRetryableFailure;
        FUZZ_CHECK(engine_.Report(in).ok());
        return;
      }
      case 3: {
        v1::SyncDown down;
        if (!down.ParseFromString(bytes)) return;
        absl::StatusOr<lease::Down> d = wire::FromProto(down);
        if (!d.ok()) {
          FUZZ_CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
          return;
        }
        link_.OnDown(*d, clock_.Now());
        for (const v1::NotClear& e : down.snapshot().entries()) {
          LocalCalls(e.target().target());
        }
        return;
      }
      default:
        if (std::optional<lease::Down> d = replica_.Tick()) {
          link_.OnDown(*d, clock_.Now());
        }
        return;
    }
  }

  void Up(int stream, const std::string& bytes) {
    v1::SyncUp up;
    if (!up.ParseFromString(bytes)) return;
    absl::StatusOr<lease::Up> in = wire::FromProto(up);
    if (!in.ok()) {
      FUZZ_CHECK(in.status().code() == absl::StatusCode::kInvalidArgument);
      FUZZ_CHECK(!in.status().message().empty());
      return;
    }
    absl::StatusOr<lease::Down> down;
    if (ids_[stream] == 0) {
      if (!in->hello.has_value()) return;
      absl::StatusOr<lease::ReplicaSync::Opened> o = replica_.Open(*in);
      if (!o.ok()) {
        Refused(o.status());
        return;
      }
      ids_[stream] = o->stream;
      down = o->first;
    } else {
      if (in->hello.has_value()) return;  // the stream refuses a second
      down = replica_.Receive(ids_[stream], *in);
    }
    if (!down.ok()) {
      Refused(down.status());
      return;
    }
    v1::SyncDown back;
    wire::ToProto(*down, &back);
    FUZZ_CHECK(wire::FromProto(back).ok()) << "the replica wrote what it "
                                              "cannot read";
    uint64_t& last = applied_[stream];
    FUZZ_CHECK(down->applied_seq == 0 || down->applied_seq >= last);
    last = std::max(last, down->applied_seq);
  }

  void Refused(const absl::Status& s) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
               s.code() == absl::StatusCode::kFailedPrecondition)
        << s;
    FUZZ_CHECK(!s.message().empty());
  }

  void LocalCalls(const std::string& endpoint) {
    const bool covered = link_.Covering(endpoint).has_value();
    engine::AdmitInput admit;
    admit.endpoint = endpoint;
    if (std::optional<engine::Decision> d =
            link_.Admit(admit, clock_.Now(), gen_)) {
      FUZZ_CHECK(!covered) << "a local answer on a key the set covers";
      FUZZ_CHECK(d->verdict == engine::Verdict::kProceed &&
                 d->reason == engine::Reason::kInitialJitter &&
                 d->admission == engine::kLocalAdmission);
    }
    engine::ReportInput report;
    report.endpoint = endpoint;
    if (std::optional<engine::Decision> d = link_.Report(report, clock_.Now())) {
      FUZZ_CHECK(!covered);
      FUZZ_CHECK(d->verdict == engine::Verdict::kDone);
    }
  }

  testing::FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  lease::ReplicaSync replica_;
  lease::AgentLink link_;
  absl::BitGen gen_;
  std::map<int, uint64_t> ids_;
  std::map<int, uint64_t> applied_;
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
