// core/wire: the one place proto <-> engine values are converted. Each
// direction is checked against the other and against hand-built protos.
#include "core/wire/wire.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::wire {
namespace {

using ::testing::HasSubstr;

TEST(WireTimes, DurationsRoundTripWithOneSign) {
  for (absl::Duration d :
       {absl::ZeroDuration(), absl::Milliseconds(1500), -absl::Milliseconds(1500),
        absl::Nanoseconds(1), absl::Hours(24)}) {
    google::protobuf::Duration p;
    ToProto(d, &p);
    EXPECT_FALSE(p.seconds() > 0 && p.nanos() < 0) << d;
    EXPECT_FALSE(p.seconds() < 0 && p.nanos() > 0) << d;
    absl::StatusOr<absl::Duration> back = FromProto(p, "x");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, d);
  }
}

TEST(WireTimes, TimestampsRoundTripBefore1970Too) {
  for (absl::Time t : {absl::UnixEpoch(), absl::FromUnixMillis(-1500),
                       absl::FromUnixMillis(1700000000123)}) {
    google::protobuf::Timestamp p;
    ToProto(t, &p);
    EXPECT_GE(p.nanos(), 0);
    absl::StatusOr<absl::Time> back = FromProto(p, "x");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, t);
  }
}

TEST(WireTimes, MalformedValuesNameTheField) {
  google::protobuf::Duration d;
  d.set_seconds(1);
  d.set_nanos(-1);
  EXPECT_THAT(std::string(FromProto(d, "retry_after").status().message()),
              HasSubstr("retry_after: not a valid Duration"));
  google::protobuf::Timestamp t;
  t.set_nanos(1000000000);
  EXPECT_THAT(std::string(FromProto(t, "deadline").status().message()),
              HasSubstr("deadline: not a valid Timestamp"));
}

TEST(WireEnums, UnspecifiedAndUnknownNumbersAreRefused) {
  EXPECT_FALSE(FromProto(v1::VERDICT_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromProto(static_cast<v1::Verdict>(9)).has_value());
  EXPECT_FALSE(FromProto(v1::OUTCOME_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromProto(v1::BREAKER_STATE_UNSPECIFIED).has_value());
  EXPECT_EQ(FromProto(v1::PERMANENT_FAILURE), engine::Outcome::kNotRetryable);
  EXPECT_EQ(FromProto(v1::LAST_CHANCE), engine::Reason::kLastChance);
  EXPECT_EQ(ToProto(engine::BreakerState::kHalfOpen), v1::HALF_OPEN);
}

TEST(WireRequests, ReportRoundTrips) {
  engine::ReportInput in;
  in.endpoint = "https://e.example/";
  in.attempt = 3;
  in.outcome = engine::Outcome::kRateLimited;
  in.retry_after = absl::Seconds(7);
  in.ratelimit_reset = absl::Seconds(30);
  in.deadline = absl::FromUnixSeconds(2000000000);
  v1::ReportRequest req;
  ToProto(in, &req);
  EXPECT_FALSE(req.has_first_attempt_time());  // unset stays unset
  EXPECT_EQ(req.ratelimit_reset().seconds(), 30);
  absl::StatusOr<engine::ReportInput> back = FromProto(req);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->endpoint, in.endpoint);
  EXPECT_EQ(back->attempt, 3);
  EXPECT_EQ(back->outcome, engine::Outcome::kRateLimited);
  EXPECT_EQ(back->retry_after, absl::Seconds(7));
  EXPECT_EQ(back->ratelimit_reset, absl::Seconds(30));
  EXPECT_EQ(back->deadline, in.deadline);
  EXPECT_EQ(back->first_attempt_time, absl::InfinitePast());

  req.mutable_ratelimit_reset()->set_nanos(-5);  // seconds 30: bad sign mix
  EXPECT_THAT(std::string(FromProto(req).status().message()),
              HasSubstr("ratelimit_reset: not a valid Duration"));
  req.clear_ratelimit_reset();
  ASSERT_TRUE(FromProto(req).ok());
  EXPECT_FALSE(FromProto(req)->ratelimit_reset.has_value());

  req.set_outcome(v1::OUTCOME_UNSPECIFIED);
  EXPECT_EQ(FromProto(req).status().message(), "outcome: must be set");
  req.set_outcome(static_cast<v1::Outcome>(42));
  EXPECT_EQ(FromProto(req).status().message(), "outcome: unknown value 42");
}

TEST(WireDecisions, TheReceiverTrustsDeferForOverItsPeersClock) {
  const absl::Time server_now = absl::FromUnixSeconds(1000);
  engine::Decision d;
  d.verdict = engine::Verdict::kDefer;
  d.reason = engine::Reason::kCircuitOpen;
  d.attempt = 2;
  d.defer_until = server_now + absl::Seconds(3);
  v1::Decision p;
  ToProto(d, server_now, &p);
  const absl::Time client_now = absl::FromUnixSeconds(5000);  // clocks differ
  absl::StatusOr<engine::Decision> back = FromProto(p, client_now);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->verdict, engine::Verdict::kDefer);
  EXPECT_EQ(back->reason, engine::Reason::kCircuitOpen);
  EXPECT_EQ(back->attempt, 2);
  EXPECT_EQ(back->defer_until, client_now + absl::Seconds(3));

  p.clear_defer_for();
  back = FromProto(p, client_now);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->defer_until, server_now + absl::Seconds(3));
  p.clear_defer_until();
  EXPECT_EQ(FromProto(p, client_now).status().code(),
            absl::StatusCode::kInternal);
  p.set_verdict(v1::VERDICT_UNSPECIFIED);
  EXPECT_EQ(FromProto(p, client_now).status().code(),
            absl::StatusCode::kInternal);
}

TEST(WireBatches, TheServersMessages) {
  EXPECT_TRUE(CheckBatchSize(1, 10).ok());
  EXPECT_TRUE(CheckBatchSize(10, 10).ok());
  EXPECT_EQ(CheckBatchSize(0, 10).message(),
            "items: a batch holds 1..10 items (limits.max_batch_size), got 0");
  EXPECT_EQ(CheckBatchSize(11, 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrefixItem(absl::InvalidArgumentError("endpoint: empty"), 3)
                .message(),
            "items[3].endpoint: empty");
}

}  // namespace
}  // namespace stagger::wire
