// Fuzz target engine_ops: a sequence of Engine operations on a FakeClock,
// through the engine's public API only (core/engine/engine.h), with
// configuration changes and eviction in the mix.
//
// Input: a sequence of operations, each an op byte and its arguments taken
// by ByteReader (missing bytes read as zeros):
//   Admit / Report   an endpoint (one of 12 keys, so that state builds up,
//                    or a fuzzed key), attempt, outcome, Retry-After,
//                    deadline and first-attempt time relative to now
//   Advance          the clock, 0..~18 h (big jumps cross every window)
//   SetConfig        a configuration built from fuzzed values, each inside
//                    its range (config_ranges.h), so that it validates;
//                    overrides by prefix or glob
//   EvictIdle, Inspect, List
//
// Invariants: each decision as fuzz_support.h's DecisionBounds (over every
// config applied so far); a bad input is INVALID_ARGUMENT with a message
// and changes nothing tracked; tracked endpoints grow only while below the
// current limits.max_endpoints (a lower limit set by a reload is reached by
// eviction, not by dropping state); Inspect and List agree with Stats.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/engine/config_ranges.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/testing/fake_clock.h"

namespace stagger::fuzz {
namespace {

const char* const kKeys[] = {"a",  "a/1", "b",   "b/2",  "c.example", "d",
                             "e",  "f",   "b/3", "zz",   "a.example", "g"};

// A duration in `r`, in whole milliseconds.
absl::Duration DurationIn(ByteReader& in, const engine::DurationRange& r) {
  return absl::Milliseconds(in.InRange(absl::ToInt64Milliseconds(r.lo),
                                       absl::ToInt64Milliseconds(r.hi)));
}

// A policy with every field drawn inside its range, the cross-field rules
// met: cap >= base, open_max >= open_base (by raising the second),
// close_after_successes <= half_open_probes (drawn below it).
engine::PolicyParams FuzzPolicy(ByteReader& in) {
  namespace rg = engine::ranges;
  engine::PolicyParams p;
  p.backoff.kind = static_cast<engine::BackoffKind>(in.InRange(1, 4));
  p.backoff.base = DurationIn(in, rg::kBackoffBase);
  p.backoff.cap = std::max(p.backoff.base, DurationIn(in, rg::kBackoffCap));
  p.backoff.max_attempts =
      static_cast<int>(in.InRange(1, 12));  // small: exhaustion is reached
  p.backoff.initial_jitter = DurationIn(in, rg::kBackoffInitialJitter);
  p.backoff.retry_after_max = DurationIn(in, rg::kBackoffRetryAfterMax);
  p.backoff.horizon =
      in.Bool() ? absl::ZeroDuration() : DurationIn(in, rg::kBackoffHorizon);
  p.breaker.enabled = in.Bool();
  p.breaker.consecutive_failures =
      static_cast<int>(in.InRange(1, 6));
  p.breaker.open_base = DurationIn(in, rg::kBreakerOpenBase);
  p.breaker.open_max =
      std::max(p.breaker.open_base, DurationIn(in, rg::kBreakerOpenMax));
  p.breaker.half_open_probes = static_cast<int>(in.InRange(1, 4));
  p.breaker.close_after_successes =
      static_cast<int>(in.InRange(1, p.breaker.half_open_probes));
  p.budget.ratio = static_cast<double>(in.InRange(0, 100)) / 100.0;
  p.budget.min_retries_per_second = static_cast<double>(in.InRange(0, 10));
  p.deferral.spread = DurationIn(in, rg::kDeferralSpread);
  p.deferral.release_rate_per_second =
      in.Bool() ? 0.0 : static_cast<double>(in.InRange(1, 1000));
  return p;
}

engine::EngineConfig FuzzConfig(ByteReader& in) {
  engine::EngineConfig c;
  c.default_policy = FuzzPolicy(in);
  const int overrides = static_cast<int>(in.InRange(0, 2));
  for (int i = 0; i < overrides; ++i) {
    engine::PolicyOverride o;
    o.match = in.Bool() ? engine::PolicyOverride::Match::kGlob
                        : engine::PolicyOverride::Match::kPrefix;
    o.pattern = in.Bool() ? std::string(kKeys[in.InRange(0, 11)]) : "*";
    o.policy = FuzzPolicy(in);
    c.overrides.push_back(o);
  }
  c.limits.max_endpoints = in.InRange(1, 16);
  c.limits.idle_eviction = absl::Seconds(in.InRange(1, 120));
  c.limits.max_key_bytes = static_cast<int>(in.InRange(1, 64));
  return c;
}

class Session {
 public:
  Session() : engine_(engine::EngineConfig{}, &clock_, &random_) {
    config_ = engine::EngineConfig{};
    config_.limits.max_endpoints = 8;
    engine_.SetConfig(config_);
    bounds_.Add(config_);
  }

  void Run(ByteReader& in) {
    int ops = 0;
    while (!in.empty() && ops++ < 2000) {
      const int64_t before = engine_.Stats().tracked;
      switch (in.Take<uint8_t>() % 8) {
        case 0:
        case 1: Admit(in); break;
        case 2:
        case 3: Report(in); break;
        case 4: Advance(in); break;
        case 5: SetConfig(in); break;
        case 6: engine_.EvictIdle(); break;
        default: Inspect(in); break;
      }
      const int64_t after = engine_.Stats().tracked;
      FUZZ_CHECK(after <= before || after <= config_.limits.max_endpoints)
          << "tracked grew from " << before << " to " << after
          << " past max_endpoints " << config_.limits.max_endpoints;
      FUZZ_CHECK(after >= 0);
    }
  }

 private:
  std::string Key(ByteReader& in) {
    const uint8_t pick = in.Take<uint8_t>();
    if (pick < 240) return kKeys[pick % 12];
    return in.Bytes(80);  // may be empty, too long, not UTF-8, ...
  }
  // Deadline / first attempt relative to now; InfiniteFuture/Past if unset.
  absl::Time Around(ByteReader& in, absl::Time unset) {
    const int16_t s = in.Take<int16_t>();
    if (s == 0) return unset;
    return clock_.Now() + absl::Milliseconds(100) * s;
  }

  // 0..65 s in milliseconds, or 0..18 h in seconds.
  void Advance(ByteReader& in) {
    const absl::Duration amount = absl::Milliseconds(in.Take<uint16_t>());
    clock_.Advance(in.Bool() ? amount : amount * 1000);
  }

  void Admit(ByteReader& in) {
    const std::string key = Key(in);
    engine::AdmitInput a;
    a.endpoint = key;
    a.attempt = static_cast<int>(in.InRange(0, 14));
    a.deadline = Around(in, absl::InfiniteFuture());
    a.first_attempt_time = Around(in, absl::InfinitePast());
    Check(engine_.Admit(a), a.deadline, a.attempt);
  }

  void Report(ByteReader& in) {
    const std::string key = Key(in);
    engine::ReportInput r;
    r.endpoint = key;
    r.attempt = static_cast<int>(in.InRange(0, 14));
    r.outcome = static_cast<engine::Outcome>(in.InRange(1, 5));
    const uint16_t ra = in.Take<uint16_t>();
    if (ra != 0) r.retry_after = absl::Seconds(ra * 2 - 1000);  // some < 0
    r.deadline = Around(in, absl::InfiniteFuture());
    r.first_attempt_time = Around(in, absl::InfinitePast());
    const bool final_answer = r.outcome == engine::Outcome::kSuccess ||
                              r.outcome == engine::Outcome::kNotRetryable;
    Check(engine_.Report(r), r.deadline,
          final_answer ? r.attempt : r.attempt + 1);
  }

  void Check(const absl::StatusOr<engine::Decision>& d, absl::Time deadline,
             int attempt) {
    if (!d.ok()) {
      FUZZ_CHECK(d.status().code() == absl::StatusCode::kInvalidArgument)
          << d.status();
      FUZZ_CHECK(!d.status().message().empty());
      return;
    }
    bounds_.Check(*d, clock_.Now(), deadline, attempt);
  }

  void SetConfig(ByteReader& in) {
    engine::EngineConfig c = FuzzConfig(in);
    const absl::Status valid = engine::ValidateEngineConfig(c);
    FUZZ_CHECK(valid.ok()) << "fuzz config out of range: " << valid.message();
    engine_.SetConfig(c);
    config_ = c;
    bounds_.Add(c);
  }

  void Inspect(ByteReader& in) {
    const std::string key = Key(in);
    absl::StatusOr<engine::EndpointSnapshot> snap = engine_.Inspect(key);
    if (snap.ok()) FUZZ_CHECK(snap->endpoint == key);
    const engine::ListPage page = engine_.List("", 100, std::nullopt);
    const int64_t tracked = engine_.Stats().tracked;
    FUZZ_CHECK(page.total_tracked == tracked);
    FUZZ_CHECK(static_cast<int64_t>(page.endpoints.size()) == tracked)
        << page.endpoints.size() << " listed, " << tracked << " tracked";
    for (size_t i = 1; i < page.endpoints.size(); ++i) {
      FUZZ_CHECK(page.endpoints[i - 1].endpoint < page.endpoints[i].endpoint);
    }
  }

  testing::FakeClock clock_;
  engine::SeededRandom random_{11};
  engine::Engine engine_;
  engine::EngineConfig config_;
  DecisionBounds bounds_;
};

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stagger::fuzz::ByteReader in(data, size);
  stagger::fuzz::Session session;
  session.Run(in);
  return 0;
}
