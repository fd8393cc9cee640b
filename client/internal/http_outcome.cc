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

// Whether `s` has the shape of `pattern`: 'A' a letter, 'D' a digit, '_' a
// digit or a space, any other character itself.
bool HasShape(absl::string_view s, absl::string_view pattern) {
  if (s.size() != pattern.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = pattern[i] == 'A'   ? absl::ascii_isalpha(c)
                    : pattern[i] == 'D' ? absl::ascii_isdigit(c)
                    : pattern[i] == '_' ? (c == ' ' || absl::ascii_isdigit(c))
                                        : c == pattern[i];
    if (!ok) return false;
  }
  return true;
}

// The three HTTP-date forms, UTC ("GMT" is required by the grammar). Each
// is checked for its exact shape first: absl::ParseTime is lenient (any
// run of spaces, one-digit fields, short years: "Sun Nov 6 0:49:394" would
// be year 4) and accepts "infinite-future" / "infinite-past" whatever the
// format (both found by tests/fuzz/retry_after_fuzz.cc).
std::optional<absl::Time> ParseHttpDate(absl::string_view s) {
  const char* format = nullptr;
  if (HasShape(s, "AAA, DD AAA DDDD DD:DD:DD GMT")) {
    format = "%a, %d %b %Y %H:%M:%S GMT";  // IMF-fixdate
  } else if (HasShape(s, "AAA AAA _D DD:DD:DD DDDD")) {
    format = "%a %b %e %H:%M:%S %Y";  // asctime
  } else {
    // RFC 850: a whole day name, then a fixed shape.
    const size_t comma = s.find(',');
    if (comma != absl::string_view::npos && comma >= 6 &&
        HasShape(s.substr(0, comma), std::string(comma, 'A')) &&
        HasShape(s.substr(comma), ", DD-AAA-DD DD:DD:DD GMT")) {
      format = "%A, %d-%b-%y %H:%M:%S GMT";
    }
  }
  absl::Time t;
  std::string err;
  if (format == nullptr ||
      !absl::ParseTime(format, std::string(s), absl::UTCTimeZone(), &t, &err)) {
    return std::nullopt;
  }
  return t;
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

std::optional<absl::Duration> ParseRateLimitReset(absl::string_view header) {
  absl::string_view s = absl::StripAsciiWhitespace(header);
  // An sf-integer Item: its parameters (";key=value...") say nothing about
  // when the quota resets.
  const size_t params = s.find(';');
  if (params != absl::string_view::npos) {
    s = absl::StripTrailingAsciiWhitespace(s.substr(0, params));
  }
  // RFC 8941 section 3.3.1: at most 15 digits.
  if (!AllDigits(s) || s.size() > 15) return std::nullopt;
  return ParseDeltaSeconds(s);
}

}  // namespace stagger::client
