// core/http/query_string: what a browser sends parses to its values;
// every other query is refused with a message naming what is wrong, and
// (property, over random bytes) the parser never accepts a value a client
// could not have meant and never echoes raw bytes.
#include "core/http/query_string.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace stagger::http {
namespace {

const std::vector<absl::string_view> kAllowed = {"filter", "page_size",
                                                 "page_token", "key"};

TEST(QueryStringTest, ParsesWhatABrowserSends) {
  auto q = ParseQueryString("filter=all&page_size=20&page_token=6162", kAllowed);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->size(), 3u);
  EXPECT_EQ(q->Get("filter"), "all");
  EXPECT_EQ(q->Get("page_size"), "20");
  EXPECT_EQ(q->Get("page_token"), "6162");
  EXPECT_EQ(q->Get("key"), std::nullopt);
}

TEST(QueryStringTest, DecodesPercentAndPlus) {
  auto q = ParseQueryString("key=orders%2F%3Cb%3E+x%26y%3D%C3%A9%25", kAllowed);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Get("key"), "orders/<b> x&y=\xC3\xA9%");
  auto empty_value = ParseQueryString("key=", kAllowed);
  ASSERT_TRUE(empty_value.ok());
  EXPECT_EQ(empty_value->Get("key"), "");
}

TEST(QueryStringTest, EmptyQueryAndEmptyPiecesHaveNoParameters) {
  for (absl::string_view raw : {"", "&", "&&&"}) {
    auto q = ParseQueryString(raw, kAllowed);
    ASSERT_TRUE(q.ok()) << raw << ": " << q.status();
    EXPECT_EQ(q->size(), 0u);
  }
}

TEST(QueryStringTest, RefusesWithAMessageNamingTheProblem) {
  const std::string too_long(kMaxQueryBytes + 1, 'a');
  std::string too_many;
  for (int i = 0; i <= kMaxParams; ++i) absl::StrAppend(&too_many, "key=", i, "&");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"page_size", "want name=value"},
      {"=5", "want name=value"},
      {"bogus=1", "unknown parameter \"bogus\"; this page takes filter, "
                  "page_size, page_token, key"},
      {"key=a&key=b", "key: given more than once"},
      {"key=%zz", "key: '%' must be followed by two hex digits"},
      {"key=%4", "two hex digits"},
      {"key=%", "two hex digits"},
      {"ke%y=1", "name: '%' must be followed"},
      {"key=%FF", "key: not well-formed UTF-8"},
      {"key=%C0%AF", "key: not well-formed UTF-8"},
      {"key=a%00b", "key: control character"},
      {"key=%0A", "key: control character"},
      {"key=%7F", "key: control character"},
      {"%00=1", "name: control character"},
      {too_long, "8193 bytes; at most 8192"},
      {too_many, "17 parameters; at most 16"},
  };
  for (const auto& [raw, want] : cases) {
    auto q = ParseQueryString(raw, kAllowed);
    ASSERT_FALSE(q.ok()) << raw;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(q.status().message(), "query: "))
        << q.status().message();
    EXPECT_TRUE(absl::StrContains(q.status().message(), want))
        << raw.substr(0, 60) << " -> " << q.status().message();
  }
}

TEST(QueryStringTest, NoParametersAllowedSaysSo) {
  auto q = ParseQueryString("x=1", {});
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(absl::StrContains(q.status().message(), "this page takes none"));
}

TEST(QueryStringTest, IntParamTakesOnlyPlainDecimalsInRange) {
  auto q = ParseQueryString("page_size=250", kAllowed);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*IntParam(*q, "page_size", 1, 1000, 100), 250);
  EXPECT_EQ(*IntParam(*q, "key", 1, 1000, 100), 100);  // absent
  EXPECT_EQ(*IntParam(*ParseQueryString("page_size=0007", kAllowed),
                      "page_size", 1, 1000, 100), 7);
  for (absl::string_view bad :
       {"0", "1001", "-1", "+5", "1e3", "%205", "5%20", "", "0x10",
        "9999999999", "1.0"}) {
    auto p = ParseQueryString(absl::StrCat("page_size=", bad), kAllowed);
    ASSERT_TRUE(p.ok()) << bad;
    absl::StatusOr<int> n = IntParam(*p, "page_size", 1, 1000, 100);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(n.status().message(),
                                  "page_size: want an integer in [1, 1000]"))
        << n.status().message();
  }
}

TEST(QueryStringTest, QuotedIsPrintableAndCut) {
  EXPECT_EQ(Quoted("a\"b\n\xff"), "\"a\\\"b\\n\\xff\"");
  const std::string q = Quoted(std::string(100, 'x'));
  EXPECT_EQ(q, absl::StrCat("\"", std::string(kMaxQuotedBytes, 'x'), "...\""));
}

// Percent-encodes every byte but [A-Za-z0-9_.~-], as a strict client would.
std::string Encode(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '_' || c == '.' || c == '~' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%%%02X", c));
    }
  }
  return out;
}

// Property: any set of allowed names with printable UTF-8 values, encoded,
// parses back to exactly those values.
TEST(QueryStringTest, PropertyEncodedParametersRoundTrip) {
  std::mt19937 rng(20260101);
  const std::vector<std::string> pieces = {"a", "Z", "/", " ", "&", "=", "%",
                                           "+", "<", "\"", "\xC3\xA9",
                                           "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  for (int round = 0; round < 2000; ++round) {
    std::map<std::string, std::string> want;
    std::string raw;
    for (absl::string_view name : kAllowed) {
      if (rng() % 2) continue;
      std::string value;
      for (int n = rng() % 12; n > 0; --n) value += pieces[rng() % pieces.size()];
      want[std::string(name)] = value;
      absl::StrAppend(&raw, raw.empty() ? "" : "&", name, "=", Encode(value));
    }
    auto q = ParseQueryString(raw, kAllowed);
    ASSERT_TRUE(q.ok()) << raw << ": " << q.status();
    EXPECT_EQ(q->size(), want.size());
    for (const auto& [name, value] : want) EXPECT_EQ(q->Get(name), value) << raw;
  }
}

// Property: random bytes either parse to well-formed, control-free values
// of allowed names, or are refused with a short printable message.
TEST(QueryStringTest, PropertyRandomBytesAreParsedOrRefusedCleanly) {
  std::mt19937 rng(7);
  const std::string alphabet = "%&=+akeyfilterpage_sz0123456789ABCDEFxX\xC3\xA9\xFF\x01 ";
  for (int round = 0; round < 20000; ++round) {
    std::string raw;
    for (int n = rng() % 48; n > 0; --n) raw.push_back(alphabet[rng() % alphabet.size()]);
    if (rng() % 4 == 0) raw = "key=" + raw;
    auto q = ParseQueryString(raw, kAllowed);
    if (!q.ok()) {
      const absl::string_view m = q.status().message();
      EXPECT_TRUE(absl::StartsWith(m, "query: ")) << m;
      EXPECT_LT(m.size(), 300u) << m;
      for (char c : m) ASSERT_TRUE(c >= 0x20 && c < 0x7f) << m;
      continue;
    }
    for (absl::string_view name : kAllowed) {
      std::optional<absl::string_view> v = q->Get(name);
      if (!v.has_value()) continue;
      for (char c : *v) {
        ASSERT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << raw;
      }
    }
  }
}

}  // namespace
}  // namespace stagger::http
