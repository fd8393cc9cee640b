// Engine: bad input is InvalidArgument naming the field, creates no state
// and leaves existing state untouched; a key at the limit, and non-ASCII
// UTF-8, are accepted. Fake clock (engine_test_fixture.h).
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"

namespace stagger::engine {
namespace {

struct BadAdmitCase {
  std::string name;
  std::string endpoint;
  int attempt;
  std::string field;
};

class EngineBadAdmitTest : public EngineTest,
                           public ::testing::WithParamInterface<BadAdmitCase> {
};

TEST_P(EngineBadAdmitTest, InvalidArgumentNamingTheField) {
  const BadAdmitCase& c = GetParam();
  Make(EngineConfig{});
  AdmitInput in;
  in.endpoint = c.endpoint;
  in.attempt = c.attempt;
  const absl::StatusOr<Decision> d = engine().Admit(in);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(d.status().message(), c.field + ":"))
      << d.status();
  EXPECT_EQ(engine().ValidateAdmit(in).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().Stats().tracked, 0);
  EXPECT_TRUE(engine().List("", 100, std::nullopt).endpoints.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EngineBadAdmitTest,
    ::testing::Values(
        BadAdmitCase{"EmptyKey", "", 1, "endpoint"},
        BadAdmitCase{"KeyOverMax", std::string(513, 'k'), 1, "endpoint"},
        BadAdmitCase{"Newline", "a\nb", 1, "endpoint"},
        BadAdmitCase{"Nul", std::string("a\0b", 3), 1, "endpoint"},
        BadAdmitCase{"Del", "a\x7f", 1, "endpoint"},
        // Keys are proto3 strings: the same UTF-8 rule in-process.
        BadAdmitCase{"Utf8StrayContinuation", "a\x80" "b", 1, "endpoint"},
        BadAdmitCase{"Utf8Truncated", "ab\xc3", 1, "endpoint"},
        BadAdmitCase{"Utf8Overlong", "a\xc0\xaf" "b", 1, "endpoint"},
        BadAdmitCase{"Utf8Surrogate", "a\xed\xa0\x80", 1, "endpoint"},
        BadAdmitCase{"Utf8AboveMax", "a\xf4\x90\x80\x80", 1, "endpoint"},
        BadAdmitCase{"AttemptZero", "ok", 0, "attempt"},
        BadAdmitCase{"AttemptNegative", "ok", -1, "attempt"},
        BadAdmitCase{"AttemptHuge", "ok", 1000001, "attempt"}),
    [](const ::testing::TestParamInfo<BadAdmitCase>& i) {
      return i.param.name;
    });

struct BadReportCase {
  std::string name;
  std::string endpoint;
  int attempt;
  int outcome;
  std::optional<absl::Duration> retry_after;
  std::string field;
};

class EngineBadReportTest
    : public EngineTest,
      public ::testing::WithParamInterface<BadReportCase> {};

TEST_P(EngineBadReportTest, InvalidArgumentNamingTheField) {
  const BadReportCase& c = GetParam();
  Make(EngineConfig{});
  ReportInput in;
  in.endpoint = c.endpoint;
  in.attempt = c.attempt;
  in.outcome = static_cast<Outcome>(c.outcome);
  in.retry_after = c.retry_after;
  const absl::StatusOr<Decision> d = engine().Report(in);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(d.status().message(), c.field + ":"))
      << d.status();
  EXPECT_EQ(engine().ValidateReport(in).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().Stats().tracked, 0);
  if (c.field != "endpoint") {
    EXPECT_EQ(engine().Inspect(c.endpoint).status().code(),
              absl::StatusCode::kNotFound);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EngineBadReportTest,
    ::testing::Values(
        BadReportCase{"EmptyKey", "", 1, 2, std::nullopt, "endpoint"},
        BadReportCase{"KeyOverMax", std::string(513, 'k'), 1, 2, std::nullopt,
                      "endpoint"},
        BadReportCase{"Tab", "a\tb", 1, 2, std::nullopt, "endpoint"},
        BadReportCase{"AttemptZero", "ok", 0, 2, std::nullopt, "attempt"},
        BadReportCase{"AttemptNegative", "ok", -1, 2, std::nullopt, "attempt"},
        BadReportCase{"OutcomeZero", "ok", 1, 0, std::nullopt, "outcome"},
        BadReportCase{"OutcomeSix", "ok", 1, 6, std::nullopt, "outcome"},
        BadReportCase{"OutcomeMax", "ok", 1, 255, std::nullopt, "outcome"},
        BadReportCase{"RetryAfterNegative", "ok", 1, 4, -absl::Seconds(1),
                      "retry_after"},
        BadReportCase{"RetryAfterNegativeInf", "ok", 1, 4,
                      -absl::InfiniteDuration(), "retry_after"},
        BadReportCase{"RetryAfterOver24h", "ok", 1, 4,
                      absl::Hours(24) + absl::Nanoseconds(1), "retry_after"},
        BadReportCase{"RetryAfterInf", "ok", 1, 4, absl::InfiniteDuration(),
                      "retry_after"}),
    [](const ::testing::TestParamInfo<BadReportCase>& i) {
      return i.param.name;
    });

TEST_F(EngineTest, KeyAtTheLimitIsAccepted) {
  Make(EngineConfig{});
  const std::string key(512, 'k');
  EXPECT_EQ(Admit(key, 1).verdict, Verdict::kProceed);
  EXPECT_EQ(Inspect(key).endpoint, key);
  // Non-ASCII UTF-8 is fine: 2-, 3- and 4-byte sequences.
  EXPECT_EQ(Admit("https://bücher.example/ü", 1).verdict, Verdict::kProceed);
  EXPECT_EQ(Admit("https://例え.jp/\xf0\x9f\x98\x80", 1).verdict,
            Verdict::kProceed);
}

TEST_F(EngineTest, BadInputLeavesExistingStateUntouched) {
  Make(TripAfter(3));
  Fail(kEp);
  Fail(kEp);
  const EndpointSnapshot before = Inspect(kEp);
  ReportInput in;
  in.endpoint = kEp;
  in.outcome = Outcome::kRetryableFailure;
  in.retry_after = -absl::Seconds(1);
  ASSERT_FALSE(engine().Report(in).ok());
  in.retry_after.reset();
  in.attempt = 0;
  ASSERT_FALSE(engine().Report(in).ok());
  const EndpointSnapshot after = Inspect(kEp);
  EXPECT_EQ(after.consecutive_failures, before.consecutive_failures);
  EXPECT_EQ(after.previous_delay, before.previous_delay);
  EXPECT_EQ(after.breaker_state, BreakerState::kClosed);
  // One more real failure trips it: the bad reports did not count.
  Fail(kEp);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
}

TEST_F(EngineTest, InspectOfAnUnknownEndpointIsNotFound) {
  Make(EngineConfig{});
  EXPECT_EQ(engine().Inspect("never-seen").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().Inspect("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stagger::engine
