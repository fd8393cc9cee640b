// Tests of core/engine/config_ranges.h against the documentation users
// read: every numeric field of proto/stagger/v1/config.proto has a row, and
// its comment ("Default X; lo..hi") says what the row says. A field whose
// comment names another field instead of a number ("1ms..cap") must be one
// of the relations ValidateEngineConfig checks in code, listed below.
#include "core/engine/config_ranges.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

// --- config.proto, read as text --------------------------------------------

struct ProtoField {
  std::string type;     // "int32", "double", "google.protobuf.Duration", ...
  std::string comment;  // the // lines just above it, joined by spaces
};

// "Message.field" -> its type and comment, for every field of every
// message (nested enums are skipped).
std::map<std::string, ProtoField> ReadProtoFields(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  const std::regex open_re(R"(^\s*(message|enum|oneof)\s+(\w+)\s*\{)");
  const std::regex field_re(
      R"(^\s*(?:optional\s+|repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*\d+\s*;)");
  const std::regex comment_re(R"(^\s*//\s?(.*)$)");
  std::map<std::string, ProtoField> out;
  std::vector<std::pair<std::string, std::string>> blocks;  // kind, name
  std::string comment;
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, comment_re)) {
      absl::StrAppend(&comment, comment.empty() ? "" : " ", m[1].str());
      continue;
    }
    if (std::regex_search(line, m, open_re)) {
      blocks.emplace_back(m[1].str(), m[2].str());
    } else if (std::regex_search(line, m, field_re) && !blocks.empty() &&
               blocks.back().first != "enum") {
      // A oneof's fields belong to the message around it.
      std::string message;
      for (const auto& [kind, name] : blocks) {
        if (kind == "message") message = name;
      }
      out[absl::StrCat(message, ".", m[2].str())] = {m[1].str(), comment};
    } else if (line.find('}') != std::string::npos && !blocks.empty()) {
      blocks.pop_back();
    }
    comment.clear();
  }
  return out;
}

bool IsNumeric(const std::string& type) {
  return type == "int32" || type == "int64" || type == "uint32" ||
         type == "uint64" || type == "double" || type == "float" ||
         type == "google.protobuf.Duration";
}

// "Default X; lo..hi" or "Default X; (lo, hi]" in a comment.
struct Documented {
  std::string default_value;
  std::string lo;
  std::string hi;
  bool lo_open = false;
};

std::optional<Documented> ParseDocumented(const std::string& comment) {
  static const std::regex dotted(
      R"(Default:? ([^;]+); (\S+?)\.\.(\S+?(?: days?)?)\.?(?:\s|$))");
  static const std::regex interval(
      R"(Default:? ([^;]+); ([\[(])([^,]+), ([^\]]+)\])");
  std::smatch m;
  if (std::regex_search(comment, m, interval)) {
    return Documented{m[1].str(), m[3].str(), m[4].str(), m[2].str() == "("};
  }
  if (std::regex_search(comment, m, dotted)) {
    return Documented{m[1].str(), m[2].str(), m[3].str(), false};
  }
  return std::nullopt;
}

// "200ms", "10s", "10min", "1h", "1 day", "7 days"; a bare "0" is zero.
std::optional<absl::Duration> ParseDocDuration(const std::string& text) {
  static const std::regex re(R"(^(\d+)(ms|s|min|h| days?)?$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  int64_t n = 0;
  if (!absl::SimpleAtoi(m[1].str(), &n)) return std::nullopt;
  const std::string unit = m[2].str();
  if (unit.empty()) {
    return n == 0 ? std::optional<absl::Duration>(absl::ZeroDuration())
                  : std::nullopt;
  }
  if (unit == "ms") return absl::Milliseconds(n);
  if (unit == "s") return absl::Seconds(n);
  if (unit == "min") return absl::Minutes(n);
  if (unit == "h") return absl::Hours(n);
  return absl::Hours(24 * n);  // " day" / " days"
}

std::optional<double> ParseDocNumber(const std::string& text) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return std::nullopt;
  return v;
}

// --- Relations: bounds the proto states as another field --------------------

enum class Which { kLo, kHi, kDefault };

struct Relation {
  std::string field;  // "Message.field"
  Which which;
  std::string words;  // as config.proto writes it
  // The row whose bound (the same bound for kLo/kHi, the default for
  // kDefault) this row's absolute value must equal.
  ranges::AnyFieldRange same_as;
  Which same_as_which;
};

const std::vector<Relation>& Relations() {
  static const auto* relations = new std::vector<Relation>{
      // cap >= base: base is below cap, so base's 1h ceiling is cap's.
      {"Backoff.base", Which::kHi, "cap", &ranges::kBackoffCap, Which::kHi},
      {"Backoff.cap", Which::kLo, "base", &ranges::kBackoffBase, Which::kLo},
      {"Backoff.retry_after_max", Which::kDefault, "equal to cap",
       &ranges::kBackoffCap, Which::kDefault},
      {"CircuitBreaker.open_max", Which::kLo, "open_base",
       &ranges::kBreakerOpenBase, Which::kLo},
      {"CircuitBreaker.close_after_successes", Which::kHi, "half_open_probes",
       &ranges::kBreakerHalfOpenProbes, Which::kHi},
  };
  return *relations;
}

// Numeric fields deliberately not in the table, with the reason.
const std::map<std::string, std::string>& NotInTable() {
  static const auto* fields = new std::map<std::string, std::string>{
      {"Deferral.release_rate_per_second",
       "its own rule in engine_config.cc's ValidateDeferral"},
  };
  return *fields;
}

// One row in a uniform, printable form.
struct Row {
  std::string field;  // "Message.field"
  std::string kind;   // the proto types it may have
  bool lo_open = false;
  // One of the two is used, by kind.
  double lo = 0, hi = 0, def = 0;
  absl::Duration dlo, dhi, ddef;
  bool is_duration = false;
};

Row ToRow(const ranges::AnyFieldRange& any) {
  Row row;
  std::visit(
      [&row](const auto* r) {
        row.field = absl::StrCat(r->message, ".", r->field);
        row.lo_open = r->lo_open;
        using T = std::decay_t<decltype(r->lo)>;
        if constexpr (std::is_same_v<T, absl::Duration>) {
          row.is_duration = true;
          row.kind = "google.protobuf.Duration";
          row.dlo = r->lo;
          row.dhi = r->hi;
          row.ddef = r->default_value;
        } else {
          row.kind = std::is_same_v<T, double> ? "double" : "int32 int64";
          row.lo = static_cast<double>(r->lo);
          row.hi = static_cast<double>(r->hi);
          row.def = static_cast<double>(r->default_value);
        }
      },
      any);
  return row;
}

std::string Show(const Row& row, Which which) {
  if (row.is_duration) {
    const absl::Duration d = which == Which::kLo   ? row.dlo
                             : which == Which::kHi ? row.dhi
                                                   : row.ddef;
    return absl::FormatDuration(d);
  }
  return absl::StrCat(which == Which::kLo   ? row.lo
                      : which == Which::kHi ? row.hi
                                            : row.def);
}

// Whether config.proto's `text` for a bound (or default) equals the row's.
bool SameValue(const Row& row, Which which, const std::string& text) {
  if (row.is_duration) {
    const std::optional<absl::Duration> d = ParseDocDuration(text);
    const absl::Duration want = which == Which::kLo   ? row.dlo
                                : which == Which::kHi ? row.dhi
                                                      : row.ddef;
    return d.has_value() && *d == want;
  }
  const std::optional<double> v = ParseDocNumber(text);
  const double want = which == Which::kLo   ? row.lo
                      : which == Which::kHi ? row.hi
                                            : row.def;
  return v.has_value() && *v == want;
}

const Relation* FindRelation(const std::string& field, Which which) {
  for (const Relation& r : Relations()) {
    if (r.field == field && r.which == which) return &r;
  }
  return nullptr;
}

class ConfigRangesTest : public ::testing::Test {
 protected:
  const std::map<std::string, ProtoField> proto_ =
      ReadProtoFields(STAGGER_CONFIG_PROTO);
};

// --- The tests
// ----------------------------------------------------------------

TEST_F(ConfigRangesTest, TheProtoIsReadAtAll) {
  // Guards the parser: a regex that matched nothing would pass the others.
  ASSERT_TRUE(proto_.count("Backoff.base"));
  EXPECT_EQ(proto_.at("Backoff.base").type, "google.protobuf.Duration");
  EXPECT_EQ(proto_.at("Backoff.base").comment, "Default 200ms; 1ms..cap.");
  EXPECT_EQ(proto_.at("Limits.max_endpoints").type, "int64");
  EXPECT_TRUE(proto_.count("Override.glob")) << "oneof members are fields";
  EXPECT_FALSE(proto_.count("Kind.EXPONENTIAL")) << "enum values are not";
  EXPECT_GE(proto_.size(), 30u);
}

TEST_F(ConfigRangesTest, EveryNumericProtoFieldHasARow) {
  std::set<std::string> rows;
  for (const ranges::AnyFieldRange& r : ranges::kAll) {
    EXPECT_TRUE(rows.insert(ToRow(r).field).second)
        << ToRow(r).field << " has two rows";
  }
  for (const auto& [field, f] : proto_) {
    if (!IsNumeric(f.type)) continue;
    EXPECT_TRUE(rows.count(field) || NotInTable().count(field))
        << field << " (" << f.type << ") has no row in config_ranges.h";
    EXPECT_FALSE(rows.count(field) && NotInTable().count(field))
        << field << " is both a row and listed as not one";
  }
}

TEST_F(ConfigRangesTest, EveryRowIsAProtoFieldOfItsKind) {
  for (const ranges::AnyFieldRange& any : ranges::kAll) {
    const Row row = ToRow(any);
    auto it = proto_.find(row.field);
    ASSERT_NE(it, proto_.end()) << row.field << " is not in config.proto";
    EXPECT_THAT(row.kind, ::testing::HasSubstr(it->second.type)) << row.field;
  }
}

TEST_F(ConfigRangesTest, ProtoCommentsStateEachRowsDefaultAndRange) {
  for (const ranges::AnyFieldRange& any : ranges::kAll) {
    const Row row = ToRow(any);
    ASSERT_TRUE(proto_.count(row.field)) << row.field;
    const std::string& comment = proto_.at(row.field).comment;
    const std::optional<Documented> doc = ParseDocumented(comment);
    ASSERT_TRUE(doc.has_value())
        << row.field << ": no \"Default X; lo..hi\" in \"" << comment << "\"";
    EXPECT_EQ(doc->lo_open, row.lo_open) << row.field;
    const std::pair<Which, const std::string*> parts[] = {
        {Which::kLo, &doc->lo},
        {Which::kHi, &doc->hi},
        {Which::kDefault, &doc->default_value}};
    for (const auto& [which, text] : parts) {
      if (const Relation* rel = FindRelation(row.field, which)) {
        EXPECT_EQ(*text, rel->words) << row.field;
        continue;
      }
      EXPECT_TRUE(SameValue(row, which, *text))
          << row.field << ": config.proto says \"" << *text
          << "\", config_ranges.h " << Show(row, which) << " (comment: \""
          << comment << "\")";
    }
  }
}

// Where the proto names a field, the row still holds an absolute value
// (used when the other field is itself out of range); it must be the one
// the named field implies.
TEST_F(ConfigRangesTest, RelationsAgreeWithTheRowTheyName) {
  for (const Relation& rel : Relations()) {
    const Row* row = nullptr;
    Row found;
    for (const ranges::AnyFieldRange& any : ranges::kAll) {
      if (ToRow(any).field == rel.field) {
        found = ToRow(any);
        row = &found;
      }
    }
    ASSERT_NE(row, nullptr) << rel.field;
    const Row other = ToRow(rel.same_as);
    EXPECT_EQ(Show(*row, rel.which), Show(other, rel.same_as_which))
        << rel.field << " vs " << other.field;
  }
}

// --- The helpers above, on their own
// ------------------------------------------

TEST(ParseDocumentedTest, ReadsTheNotationsConfigProtoUses) {
  auto d = ParseDocumented("Attempts. Default 8; 1..100.");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->default_value, "8");
  EXPECT_EQ(d->lo, "1");
  EXPECT_EQ(d->hi, "100");
  d = ParseDocumented("Default 10min; 1s..7 days.");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->hi, "7 days");
  d = ParseDocumented("Default 0.5; (0, 1].");
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->lo_open);
  EXPECT_EQ(d->lo, "0");
  EXPECT_EQ(d->hi, "1");
  d = ParseDocumented("Default 1s; 10ms..1h. Each repeated trip ...");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->hi, "1h");
  d = ParseDocumented("Default 10; 0..1e6.");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->hi, "1e6");
  EXPECT_FALSE(ParseDocumented("false disables the breaker. Default true."));
}

TEST(ParseDocDurationTest, ReadsUnits) {
  EXPECT_EQ(ParseDocDuration("200ms"), absl::Milliseconds(200));
  EXPECT_EQ(ParseDocDuration("10min"), absl::Minutes(10));
  EXPECT_EQ(ParseDocDuration("1 day"), absl::Hours(24));
  EXPECT_EQ(ParseDocDuration("7 days"), absl::Hours(24 * 7));
  EXPECT_EQ(ParseDocDuration("0"), absl::ZeroDuration());
  EXPECT_FALSE(ParseDocDuration("5").has_value()) << "a unit is required";
  EXPECT_FALSE(ParseDocDuration("cap").has_value());
}

}  // namespace
}  // namespace stagger::engine
