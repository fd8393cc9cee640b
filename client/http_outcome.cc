#include "client/http_outcome.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace stagger::client {

engine::Outcome OutcomeFromHttpStatus(int status) {
  using engine::Outcome;
  if (status >= 200 && status <= 299) return Outcome::kSuccess;
  if (status == 408) return Outcome::kTimeout;
  if (status == 429 || status == 503) return Outcome::kRateLimited;
  if (status >= 500 && status <= 599) return Outcome::kRetryableFailure;
  if (status >= 300 && status <= 499) return Outcome::kNotRetryable;
  return Outcome::kRetryableFailure;  // 1xx, 0, negative, >= 600
}

namespace {

absl::Duration Clamp(absl::Duration d) {
  return std::clamp(d, absl::ZeroDuration(), engine::kMaxRetryAfter);
}

bool AllDigits(absl::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_isdigit(c); });
}

// "1*DIGIT", saturating: any count above one day is one day.
absl::Duration ParseDeltaSeconds(absl::string_view digits) {
  const int64_t max_seconds = absl::ToInt64Seconds(engine::kMaxRetryAfter);
  int64_t v = 0;
  for (char c : digits) {
    v = v * 10 + (c - '0');
    if (v > max_seconds) return engine::kMaxRetryAfter;
  }
  return absl::Seconds(v);
}

// The three HTTP-date forms, UTC ("GMT" is required by the grammar).
std::optional<absl::Time> ParseHttpDate(absl::string_view s) {
  static constexpr const char* kFormats[] = {
      "%a, %d %b %Y %H:%M:%S GMT",  // IMF-fixdate
      "%A, %d-%b-%y %H:%M:%S GMT",  // RFC 850
      "%a %b %e %H:%M:%S %Y",       // asctime
  };
  const std::string input(s);
  for (const char* format : kFormats) {
    absl::Time t;
    std::string err;
    if (absl::ParseTime(format, input, absl::UTCTimeZone(), &t, &err)) {
      return t;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<absl::Duration> ParseRetryAfter(absl::string_view header,
                                              absl::Time now) {
  absl::string_view s = absl::StripAsciiWhitespace(header);
  if (s.empty()) return std::nullopt;
  if (AllDigits(s)) return ParseDeltaSeconds(s);
  if (s[0] == '-' && AllDigits(s.substr(1))) return absl::ZeroDuration();
  // An HTTP-date starts with a day name: refuse numbers-with-junk early
  // ("1.5", "10s") rather than hand them to the date parser.
  if (!absl::ascii_isalpha(s[0])) return std::nullopt;
  std::optional<absl::Time> t = ParseHttpDate(s);
  if (!t.has_value()) return std::nullopt;
  return Clamp(*t - now);
}

}  // namespace stagger::client
