// engine::EndpointRecord <-> stagger.v1.state.Endpoint: every field makes
// the round trip (each set to a distinct value), instants unchanged; values
// a newer or foreign writer could put in the file read as defaults.
#include "server/state/state_record.h"

#include <string>

#include "gtest/gtest.h"

namespace stagger::state {
namespace {

engine::EndpointRecord Full() {
  engine::EndpointRecord r;
  r.key = "https://hooks.example/a";
  r.last_seen_ns = 1767225600000000001;
  r.previous_delay_ns = 2;
  r.retry_after_until_ns = 1767225630000000003;
  r.breaker.state = engine::BreakerState::kOpen;
  r.breaker.time_ns = 1767225605000000004;
  r.breaker.consecutive_failures = 5;
  r.breaker.probes_in_flight = 6;
  r.breaker.probe_successes = 7;
  r.breaker.trips = 8;
  r.breaker.window = {200000000, 8836128000, {{{9, 10}, {11, 12}, {0, 0}, {13, 0}, {0, 0}}}};
  r.budget = {2000000000, 883612800, {{{14, 15}, {16, 17}, {18, 19}, {20, 21}, {22, 23}}}};
  r.served = {1767225600, 24, 25};
  r.has_release = true;
  r.capacity = {26.5f, 27.5f, 28.5f, 29.5f, 30.5f, 1767225600031, 1767225600032,
                1767225600033, 1767225600034, 1767225600035, 36, 3, 4};
  r.pacer = {1767225600000000037, 1767225600000000038, 1767225600000000039,
             1767225600000000040, 41.5f, 42.5f, 1767225600000000043};
  return r;
}

TEST(StateRecord, EveryFieldRoundTripsThroughTheWire) {
  v1::state::Endpoint wire;
  ToProto(Full(), &wire);
  v1::state::Endpoint parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const engine::EndpointRecord back = FromProto(parsed);
  v1::state::Endpoint again;
  ToProto(back, &again);
  EXPECT_EQ(again.SerializeAsString(), wire.SerializeAsString());
  EXPECT_EQ(back.key, "https://hooks.example/a");
  EXPECT_EQ(back.breaker.state, engine::BreakerState::kOpen);
  EXPECT_EQ(back.breaker.time_ns, 1767225605000000004);
  EXPECT_EQ(wire.breaker().open_until_unix_nanos(), 1767225605000000004);
  EXPECT_EQ(back.breaker.window.slots[3][0], 13u);
  EXPECT_EQ(back.budget.slots[4][1], 23u);
  EXPECT_EQ(back.capacity.streak_start_ms, 1767225600035);
  EXPECT_EQ(back.capacity.phase, 3);
  EXPECT_EQ(back.pacer.closed_since_ns, 1767225600000000040);
  EXPECT_FLOAT_EQ(back.pacer.backlog, 42.5f);
  EXPECT_EQ(back.pacer.opened_ns, 1767225600000000043);
  EXPECT_EQ(back.served.previous_second, 25u);
}

TEST(StateRecord, NoReleaseStaysAbsent) {
  engine::EndpointRecord r = Full();
  r.has_release = false;
  v1::state::Endpoint wire;
  ToProto(r, &wire);
  EXPECT_FALSE(wire.has_release());
  EXPECT_FALSE(FromProto(wire).has_release);
}

TEST(StateRecord, HalfOpenKeepsItsLatestProbe) {
  engine::EndpointRecord r = Full();
  r.breaker.state = engine::BreakerState::kHalfOpen;
  v1::state::Endpoint wire;
  ToProto(r, &wire);
  EXPECT_EQ(wire.breaker().last_probe_unix_nanos(), r.breaker.time_ns);
  EXPECT_EQ(wire.breaker().open_until_unix_nanos(), 0);
  EXPECT_EQ(FromProto(wire).breaker.time_ns, r.breaker.time_ns);
}

TEST(StateRecord, ForeignValuesReadAsDefaults) {
  v1::state::Endpoint wire;
  wire.set_key("k");
  wire.mutable_breaker()->set_state(static_cast<v1::BreakerState>(42));
  wire.set_previous_delay_nanos(-5);
  wire.mutable_breaker()->mutable_window()->add_slots()->set_a(1);
  for (int i = 0; i < 9; ++i) wire.mutable_budget()->mutable_window()->add_slots();
  const engine::EndpointRecord r = FromProto(wire);
  EXPECT_EQ(r.breaker.state, engine::BreakerState::kClosed);
  EXPECT_EQ(r.previous_delay_ns, 0);
  EXPECT_EQ(r.breaker.window.slots[0][0], 1u);
  EXPECT_FALSE(r.has_release);
}

}  // namespace
}  // namespace stagger::state
