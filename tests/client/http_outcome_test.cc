// HTTP status -> Outcome and Retry-After parsing, table-driven.
#include "client/http_outcome.h"

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stagger::client {
namespace {

using engine::Outcome;

TEST(OutcomeFromHttpStatusTest, Table) {
  struct Case {
    int status;
    Outcome want;
  };
  const Case cases[] = {
      // 2xx: success, all of it.
      {200, Outcome::kSuccess},
      {201, Outcome::kSuccess},
      {204, Outcome::kSuccess},
      {299, Outcome::kSuccess},
      // The special cases.
      {408, Outcome::kTimeout},
      {429, Outcome::kRateLimited},
      {503, Outcome::kRateLimited},
      // Other 5xx: retryable.
      {500, Outcome::kRetryableFailure},
      {502, Outcome::kRetryableFailure},
      {504, Outcome::kRetryableFailure},
      {599, Outcome::kRetryableFailure},
      // Other 4xx: retrying cannot help.
      {400, Outcome::kNotRetryable},
      {401, Outcome::kNotRetryable},
      {403, Outcome::kNotRetryable},
      {404, Outcome::kNotRetryable},
      {409, Outcome::kNotRetryable},
      {410, Outcome::kNotRetryable},
      {422, Outcome::kNotRetryable},
      {499, Outcome::kNotRetryable},
      // 3xx: a redirect not followed comes back the same way.
      {301, Outcome::kNotRetryable},
      {302, Outcome::kNotRetryable},
      {304, Outcome::kNotRetryable},
      {399, Outcome::kNotRetryable},
      // 1xx as a final status, "no response" (0, -1) and nonsense: a broken
      // exchange, retryable.
      {100, Outcome::kRetryableFailure},
      {101, Outcome::kRetryableFailure},
      {199, Outcome::kRetryableFailure},
      {0, Outcome::kRetryableFailure},
      {-1, Outcome::kRetryableFailure},
      {99, Outcome::kRetryableFailure},
      {600, Outcome::kRetryableFailure},
      {999, Outcome::kRetryableFailure},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(OutcomeFromHttpStatus(c.status), c.want) << "HTTP " << c.status;
  }
}

TEST(ParseRetryAfterTest, Table) {
  // now = Thu, 01 Jan 2026 00:00:00 GMT
  const absl::Time now = absl::FromUnixSeconds(1767225600);
  struct Case {
    std::string header;
    std::optional<absl::Duration> want;
  };
  const Case cases[] = {
      // delta-seconds
      {"0", absl::ZeroDuration()},
      {"1", absl::Seconds(1)},
      {"120", absl::Seconds(120)},
      {"007", absl::Seconds(7)},
      {"  30\t", absl::Seconds(30)},           // surrounding whitespace
      {"86400", absl::Hours(24)},              // exactly the limit
      {"86401", absl::Hours(24)},              // clamped to 1 day
      {"99999999999999999999999", absl::Hours(24)},  // no overflow
      {"-5", absl::ZeroDuration()},            // negative: zero
      {"-0", absl::ZeroDuration()},
      // IMF-fixdate
      {"Thu, 01 Jan 2026 00:00:30 GMT", absl::Seconds(30)},
      {"Thu, 01 Jan 2026 01:00:00 GMT", absl::Hours(1)},
      {"Thu, 01 Jan 2026 00:00:00 GMT", absl::ZeroDuration()},  // now
      {"Wed, 31 Dec 2025 23:59:00 GMT", absl::ZeroDuration()},  // past
      {"Sun, 06 Nov 1994 08:49:37 GMT", absl::ZeroDuration()},  // long past
      {"Fri, 01 Jan 2027 00:00:00 GMT", absl::Hours(24)},       // clamped
      // obsolete forms
      {"Thursday, 01-Jan-26 00:01:00 GMT", absl::Seconds(60)},  // RFC 850
      {"Thu Jan  1 00:02:00 2026", absl::Seconds(120)},         // asctime
      // garbage
      {"", std::nullopt},
      {"   ", std::nullopt},
      {"1.5", std::nullopt},
      {"10s", std::nullopt},
      {"+5", std::nullopt},
      {"- 5", std::nullopt},
      {"soon", std::nullopt},
      {"12 34", std::nullopt},
      {"Thu, 01 Foo 2026 00:00:30 GMT", std::nullopt},   // bad month
      {"Thu, 01 Jan 2026 00:00:30 PST", std::nullopt},   // not GMT
      {"Thu, 01 Jan 2026 25:00:00 GMT", std::nullopt},   // bad hour
      {"Thu, 01 Jan 2026", std::nullopt},                // truncated
      {"Thu, 01 Jan 2026 00:00:30 GMT trailing", std::nullopt},
      // absl::ParseTime's own literals, which it accepts whatever the
      // format (found by the retry_after fuzz target): not HTTP-dates
      {"infinite-past", std::nullopt},
      {"infinite-future", std::nullopt},
      {"infinite-past   ", std::nullopt},
      // absl::ParseTime's leniency (also found by the fuzz target): any run
      // of spaces, one-digit fields, a year that is not four digits
      {"Sun Nov \t\t\t 6 0:49:394", std::nullopt},
      {"Thu Jan  1 00:02:00 26", std::nullopt},
      {"Thu,  01 Jan 2026 00:00:30 GMT", std::nullopt},
      {"Thu, 1 Jan 2026 00:00:30 GMT", std::nullopt},
      {"Thu, 01 Jan 2026 0:00:30 GMT", std::nullopt},
      {"Thu Jan 01 00:02:00 2026", absl::Seconds(120)},  // asctime, 2 digits
      {"Thu, 01-Jan-26 00:01:00 GMT", std::nullopt},     // RFC 850, short day
  };
  for (const Case& c : cases) {
    const std::optional<absl::Duration> got = ParseRetryAfter(c.header, now);
    EXPECT_EQ(got.has_value(), c.want.has_value()) << "\"" << c.header << "\"";
    if (got.has_value() && c.want.has_value()) {
      EXPECT_EQ(*got, *c.want) << "\"" << c.header << "\"";
    }
  }
}

TEST(ParseRateLimitResetTest, SecondsAsTheDraftWritesThem) {
  // draft-ietf-httpapi-ratelimit-headers-06: an RFC 8941 Integer of
  // seconds, parameters ignored.
  struct Case {
    const char* header;
    std::optional<absl::Duration> want;
  };
  const Case cases[] = {
      {"0", absl::ZeroDuration()},
      {"30", absl::Seconds(30)},
      {" 30\t", absl::Seconds(30)},
      {"30;w=60", absl::Seconds(30)},
      {"999999999999999", engine::kMaxRetryAfter},  // 15 digits: clamped
      {"1767225600", engine::kMaxRetryAfter},  // a Unix time: a long wait
      {"1000000000000000", std::nullopt},      // 16 digits: not an Integer
      {"", std::nullopt},
      {"-1", std::nullopt},  // not negative
      {"1.5", std::nullopt},
      {"30s", std::nullopt},
      {"Thu, 01 Jan 2026 00:00:30 GMT", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseRateLimitReset(c.header), c.want) << "\"" << c.header << "\"";
  }
}

}  // namespace
}  // namespace stagger::client
