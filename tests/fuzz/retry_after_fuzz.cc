// Fuzz target retry_after: the client's Retry-After and RateLimit-Reset
// parsing (client/http_outcome.h, ParseRetryAfter, ParseRateLimitReset) and
// HTTP status mapping.
//
// Input: [mode: 1 byte] [now: 8 bytes] then by mode % 4:
//   0  the rest is the header, as received;
//   1  delta-seconds: a fuzzed count written in decimal, with fuzzed
//      leading zeros and surrounding spaces/tabs;
//   2  IMF-fixdate of a fuzzed instant (years 1900..2200) around `now`;
//   3  asctime of a fuzzed instant.
// `now` is a fuzzed instant in years 1970..2200, whole seconds.
//
// Invariants: every answer is nullopt or within [0, kMaxRetryAfter]; a
// generated form (modes 1..3) parses to exactly min(max(value, 0), 1 day);
// a header that is neither a number nor shaped like an HTTP-date (a time of
// day "HH:MM:SS") gives nullopt; RateLimit-Reset parses only headers that
// start, past spaces, with a digit, and mode 1's forms with at most 15
// digits to the same as Retry-After; OutcomeFromHttpStatus is total.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/http_outcome.h"
#include "core/engine/decision.h"
#include "tests/fuzz/fuzz_support.h"

namespace stagger::fuzz {
namespace {

constexpr int64_t k1970 = 0;
constexpr int64_t k1900 = -2208988800;
constexpr int64_t k2200 = 7258118400;

absl::Duration Clamp(absl::Duration d) {
  return std::clamp(d, absl::ZeroDuration(), engine::kMaxRetryAfter);
}

// "HH:MM:SS" somewhere in `s`.
bool HasTimeOfDay(absl::string_view s) {
  for (size_t i = 0; i + 8 <= s.size(); ++i) {
    absl::string_view t = s.substr(i, 8);
    if (absl::ascii_isdigit(t[0]) && absl::ascii_isdigit(t[1]) &&
        t[2] == ':' && absl::ascii_isdigit(t[3]) &&
        absl::ascii_isdigit(t[4]) && t[5] == ':' &&
        absl::ascii_isdigit(t[6]) && absl::ascii_isdigit(t[7])) {
      return true;
    }
  }
  return false;
}

bool IsNumber(absl::string_view s) {
  s = absl::StripAsciiWhitespace(s);
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

void CheckRaw(absl::string_view header, absl::Time now) {
  const std::optional<absl::Duration> got = client::ParseRetryAfter(header, now);
  if (!got.has_value()) return;
  FUZZ_CHECK(*got >= absl::ZeroDuration() && *got <= engine::kMaxRetryAfter)
      << "'" << header << "' -> " << *got;
  FUZZ_CHECK(IsNumber(header) || HasTimeOfDay(header))
      << "'" << header << "' is neither a number nor an HTTP-date, parsed as "
      << *got;
}

void CheckRateLimitReset(absl::string_view header) {
  const std::optional<absl::Duration> got = client::ParseRateLimitReset(header);
  if (!got.has_value()) return;
  FUZZ_CHECK(*got >= absl::ZeroDuration() && *got <= engine::kMaxRetryAfter)
      << "'" << header << "' -> " << *got;
  const absl::string_view s = absl::StripLeadingAsciiWhitespace(header);
  FUZZ_CHECK(!s.empty() && absl::ascii_isdigit(s[0]))
      << "'" << header << "' does not start with a digit, parsed as " << *got;
}

void CheckGenerated(const std::string& header, absl::Time now,
                    absl::Duration want) {
  const std::optional<absl::Duration> got = client::ParseRetryAfter(header, now);
  FUZZ_CHECK(got.has_value()) << "'" << header << "' refused";
  FUZZ_CHECK(*got == Clamp(want))
      << "'" << header << "' -> " << *got << ", expected " << Clamp(want);
}

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagger::fuzz;
  ByteReader in(data, size);
  const uint8_t mode = in.Take<uint8_t>() % 4;
  const absl::Time now = absl::FromUnixSeconds(in.InRange(k1970, k2200));
  (void)stagger::client::OutcomeFromHttpStatus(in.Take<int32_t>());
  switch (mode) {
    case 0: {
      const std::string header = in.Rest(in.left());
      CheckRaw(header, now);
      CheckRateLimitReset(header);
      return 0;
    }
    case 1: {
      const uint64_t seconds = in.Take<uint64_t>();
      const std::string spaces(in.InRange(0, 2), ' ');
      const std::string zeros(in.InRange(0, 3), '0');
      const std::string tabs(in.InRange(0, 2), '\t');
      const std::string header = absl::StrCat(spaces, zeros, seconds, tabs);
      const absl::Duration want =
          seconds > 86400 ? absl::Hours(25)
                          : absl::Seconds(static_cast<int64_t>(seconds));
      CheckGenerated(header, now, want);
      const std::optional<absl::Duration> reset =
          stagger::client::ParseRateLimitReset(header);
      const bool short_enough = zeros.size() + absl::StrCat(seconds).size() <= 15;
      FUZZ_CHECK(reset.has_value() == short_enough) << "'" << header << "'";
      if (reset.has_value()) {
        FUZZ_CHECK(*reset == Clamp(want)) << "'" << header << "' -> " << *reset;
      }
      return 0;
    }
    default: {
      const absl::Time t = absl::FromUnixSeconds(in.InRange(k1900, k2200));
      const char* format =
          mode == 2 ? "%a, %d %b %Y %H:%M:%S GMT" : "%a %b %e %H:%M:%S %Y";
      CheckGenerated(absl::FormatTime(format, t, absl::UTCTimeZone()), now,
                     t - now);
      return 0;
    }
  }
}
