#include "tests/state/golden_snapshot.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/state/snapshot_file.h"

namespace stagger::state::testing {
namespace {

using v1::state::Endpoint;
using v1::state::Window;

constexpr int64_t kT = 1'700'000'000'000'000'000;  // an instant, Unix ns
constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kTMillis = kT / 1'000'000;

// A window of 5 slots of `slot` ns, head at kT, counts derived from `seed`.
void FillWindow(int64_t slot, uint32_t seed, Window* w) {
  w->set_slot_nanos(slot);
  w->set_head_slot(kT / slot);
  for (uint32_t k = 0; k < 5; ++k) {
    v1::state::Counts* c = w->add_slots();
    c->set_a(seed * 10 + k);
    c->set_b(seed + k);
  }
}

// Every field set: a breaker open for 40 s after its third trip, Retry-After
// in force, the release gate closed with a learned pace.
Endpoint OpenEndpoint() {
  Endpoint e;
  e.set_key("https://hooks.example/open");
  e.set_last_seen_unix_nanos(kT - 3 * kSecond);
  e.set_previous_delay_nanos(7'250'000'000);
  e.set_retry_after_until_unix_nanos(kT + 120 * kSecond);
  v1::state::Breaker* b = e.mutable_breaker();
  b->set_state(v1::OPEN);
  b->set_open_until_unix_nanos(kT + 40 * kSecond);
  b->set_last_probe_unix_nanos(kT - 60 * kSecond);
  b->set_consecutive_failures(20);
  b->set_probes_in_flight(1);
  b->set_probe_successes(2);
  b->set_trips(3);
  FillWindow(2 * kSecond, 7, b->mutable_window());
  FillWindow(kSecond, 3, e.mutable_budget()->mutable_window());
  v1::state::ServedRate* s = e.mutable_served();
  s->set_unix_second(kT / kSecond - 1);
  s->set_this_second(41);
  s->set_previous_second(950);
  v1::state::Release* r = e.mutable_release();
  r->set_pace(37.5f);
  r->set_threshold(120.25f);
  r->set_before_cuts(240.125f);
  r->set_successes_per_second(31.0625f);
  r->set_failures_per_second(0.3f);
  r->set_rates_at_unix_millis(kTMillis - 500);
  r->set_measured_from_unix_millis(kTMillis - 30'000);
  r->set_last_success_unix_millis(kTMillis - 1'250);
  r->set_cut_round_end_unix_millis(kTMillis + 800);
  r->set_streak_start_unix_millis(kTMillis - 4'000);
  r->set_rtt_millis(180);
  r->set_phase(v1::PACE_GATE_CLOSED);
  r->set_source(v1::PACE_GOODPUT);
  r->set_queue_tail_unix_nanos(kT + 90 * kSecond);
  r->set_gate_unix_nanos(kT + 41 * kSecond);
  r->set_release_end_unix_nanos(kT + 75 * kSecond);
  r->set_closed_since_unix_nanos(kT - 35 * kSecond);
  r->set_parked_seconds(1234.5f);
  r->set_backlog(4096.75f);
  return e;
}

// Half-open: probes out, the latest probe's instant, releasing.
Endpoint HalfOpenEndpoint() {
  Endpoint e;
  e.set_key("https://api.partner.example/v2/deliveries");
  e.set_last_seen_unix_nanos(kT - 1);
  e.set_previous_delay_nanos(200'000'000);
  v1::state::Breaker* b = e.mutable_breaker();
  b->set_state(v1::HALF_OPEN);
  b->set_last_probe_unix_nanos(kT - 2 * kSecond);
  b->set_probes_in_flight(4);
  b->set_probe_successes(1);
  b->set_trips(1);
  FillWindow(10 * kSecond, 2, b->mutable_window());
  v1::state::Release* r = e.mutable_release();
  r->set_pace(10);
  r->set_phase(v1::PACE_RELEASING);
  r->set_source(v1::PACE_GROWTH);
  r->set_gate_unix_nanos(kT + kSecond / 10);
  r->set_measured_from_unix_millis(kTMillis - 2'000);
  return e;
}

// Closed, as little as a record holds: the key and when it was last seen.
Endpoint ClosedEndpoint() {
  Endpoint e;
  e.set_key("a");
  e.set_last_seen_unix_nanos(kT);
  e.mutable_breaker()->set_state(v1::CLOSED);
  return e;
}

// A key at the engine's 4096-byte limit: a record over 4 KiB (a two-byte
// length) and several fields around it.
Endpoint LongKeyEndpoint() {
  Endpoint e;
  std::string key = "https://long.example/";
  while (key.size() < 4096) absl::StrAppend(&key, key.size() % 10);
  e.set_key(key);
  e.set_last_seen_unix_nanos(kT - 500 * kSecond);
  e.set_retry_after_until_unix_nanos(kT + 3600 * kSecond);
  FillWindow(kSecond, 1, e.mutable_budget()->mutable_window());
  return e;
}

// UTF-8 in the key; counters at uint32's maximum; instants at int64's
// extremes (a negative value takes a ten-byte varint).
Endpoint ExtremesEndpoint() {
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  Endpoint e;
  e.set_key("https://bücher.example/ü/日本語?q=€");
  e.set_last_seen_unix_nanos(std::numeric_limits<int64_t>::max());
  e.set_previous_delay_nanos(-1);
  v1::state::Breaker* b = e.mutable_breaker();
  b->set_state(v1::OPEN);
  b->set_open_until_unix_nanos(std::numeric_limits<int64_t>::min());
  b->set_consecutive_failures(kMax32);
  b->set_trips(kMax32);
  v1::state::ServedRate* s = e.mutable_served();
  s->set_unix_second(-1);
  s->set_this_second(kMax32);
  s->set_previous_second(kMax32);
  e.mutable_release()->set_rtt_millis(kMax32);
  e.mutable_release()->set_source(v1::PACE_HALVED);
  return e;
}

}  // namespace

std::vector<v1::state::Pause> GoldenPauses() {
  v1::state::Pause exact;
  exact.set_target("https://hooks.example/open");
  exact.set_since_unix_nanos(kT - 600 * kSecond);
  exact.set_until_unix_nanos(kT + 3000 * kSecond);
  exact.set_reason("INC-4711: the partner asked us to stop");
  exact.set_paused_by("spiffe://ops.example/alice");
  v1::state::Pause prefix;
  prefix.set_target("https://api.partner.example/");
  prefix.set_prefix(true);
  prefix.set_since_unix_nanos(kT - kSecond);
  prefix.set_until_unix_nanos(kT + 7200 * kSecond);
  prefix.set_reason(std::string(300, 'm'));  // a reason over 127 bytes
  prefix.set_paused_by("");
  return {exact, prefix};
}

std::vector<v1::state::Endpoint> GoldenEndpoints() {
  return {OpenEndpoint(), HalfOpenEndpoint(), ClosedEndpoint(),
          LongKeyEndpoint(), ExtremesEndpoint()};
}

absl::Status WriteGoldenSnapshot(const std::string& path) {
  auto writer =
      SnapshotWriter::Begin(path, kGoldenWrittenUnixNanos, kGoldenWriter);
  if (!writer.ok()) return writer.status();
  for (const v1::state::Pause& p : GoldenPauses()) {
    if (absl::Status s = (*writer)->AddPause(p); !s.ok()) return s;
  }
  for (const v1::state::Endpoint& e : GoldenEndpoints()) {
    if (absl::Status s = (*writer)->Add(e); !s.ok()) return s;
  }
  return (*writer)->Commit();
}

}  // namespace stagger::state::testing
