// Tests of core/config/config_loader: parsing (textproto and JSON, errors
// with line:column), conversion (defaults, override inheritance, proto-level
// errors with field paths) and the file functions (extension, file name in
// every error line).
#include "core/config/config_loader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "core/config/json_config.h"
#include "core/engine/engine_config.h"

namespace stagger::config {
namespace {

using ::stagger::engine::BackoffKind;
using ::stagger::engine::EngineConfig;
using ::stagger::engine::PolicyOverride;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAreArray;

const std::string kTestdata = STAGGER_CONFIG_TESTDATA;

std::string Testdata(const std::string& name) { return kTestdata + "/" + name; }

// Every field of two configs equal; on a difference the failure shows both
// as textproto.
void ExpectSameConfig(const EngineConfig& got, const EngineConfig& want) {
  const v1::config::Config g = ToProto(got);
  const v1::config::Config w = ToProto(want);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(g, w))
      << "got:\n"
      << g.DebugString() << "want:\n"
      << w.DebugString();
}

absl::StatusOr<EngineConfig> FromText(const std::string& text,
                                      Format format = Format::kTextproto) {
  absl::StatusOr<v1::config::Config> proto = ParseConfigText(text, format);
  if (!proto.ok()) return proto.status();
  return ToEngineConfig(*proto);
}

std::vector<std::string> Lines(absl::string_view message) {
  return absl::StrSplit(message, '\n');
}

// The configuration testdata/good.{textproto,json} describe, built by hand.
EngineConfig ExpectedGood() {
  EngineConfig c;
  engine::PolicyParams& d = c.default_policy;
  d.backoff.kind = BackoffKind::kFullJitter;
  d.backoff.base = absl::Milliseconds(100);
  d.backoff.cap = absl::Seconds(20);
  d.backoff.max_attempts = 6;
  d.backoff.initial_jitter = absl::Milliseconds(20);
  d.backoff.retry_after_max = absl::Seconds(20);  // unset: follows cap
  d.backoff.horizon = absl::Hours(1);
  d.budget.ratio = 0.1;
  d.budget.min_retries_per_second = 5;
  d.budget.window = absl::Seconds(30);
  d.breaker.enabled = true;
  d.breaker.consecutive_failures = 10;
  d.breaker.failure_ratio = 0.25;
  d.breaker.min_throughput = 50;
  d.breaker.window = absl::Seconds(20);
  d.breaker.open_base = absl::Seconds(2);
  d.breaker.open_max = absl::Seconds(120);
  d.breaker.half_open_probes = 4;
  d.breaker.close_after_successes = 2;
  d.breaker.probe_timeout = absl::Seconds(5);
  d.deferral.spread = absl::Seconds(2);
  d.deferral.release_rate_per_second = 500;

  PolicyOverride slow;
  slow.match = PolicyOverride::Match::kPrefix;
  slow.pattern = "https://api.slow.example/";
  slow.policy = d;                               // inherited ...
  slow.policy.backoff.cap = absl::Seconds(300);  // ... except these
  slow.policy.backoff.max_attempts = 12;
  slow.policy.backoff.retry_after_max = absl::Seconds(300);  // its own cap
  slow.policy.breaker.enabled = false;

  PolicyOverride pay;
  pay.match = PolicyOverride::Match::kGlob;
  pay.pattern = "https://*.payments.example/*";
  pay.policy = d;
  pay.policy.backoff.kind = BackoffKind::kExponential;
  pay.policy.backoff.retry_after_max = absl::Seconds(600);
  pay.policy.budget.ratio = 0.5;

  c.overrides = {slow, pay};
  c.limits.max_key_bytes = 1024;
  c.limits.max_endpoints = 50000;
  c.limits.idle_eviction = absl::Minutes(5);
  c.limits.max_batch_size = 500;
  return c;
}

// --- Good files --------------------------------------------------------

TEST(LoadConfigFileTest, GoodTextprotoGivesTheConfigItDescribes) {
  absl::StatusOr<EngineConfig> c = LoadConfigFile(Testdata("good.textproto"));
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectSameConfig(*c, ExpectedGood());
}

TEST(LoadConfigFileTest, GoodJsonGivesTheSameConfig) {
  absl::StatusOr<EngineConfig> c = LoadConfigFile(Testdata("good.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectSameConfig(*c, ExpectedGood());
}

TEST(LoadConfigFileTest, ResultPassesTheEngineValidation) {
  absl::StatusOr<EngineConfig> c = LoadConfigFile(Testdata("good.textproto"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(engine::ValidateEngineConfig(*c).ok());
}

TEST(ToProtoTest, RoundTripsThroughToEngineConfig) {
  const EngineConfig want = ExpectedGood();
  absl::StatusOr<EngineConfig> back = ToEngineConfig(ToProto(want));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameConfig(*back, want);
  // Spot-check that ToProto is not trivially empty.
  EXPECT_EQ(ToProto(want).overrides(1).glob(), "https://*.payments.example/*");
  EXPECT_EQ(ToProto(want).default_policy().backoff().cap().seconds(), 20);
}

// --- Defaults ----------------------------------------------------------

TEST(DefaultsTest, EmptyConfigEqualsTheEngineHeaderDefaults) {
  absl::StatusOr<EngineConfig> from_proto =
      ToEngineConfig(v1::config::Config());
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  ExpectSameConfig(*from_proto, EngineConfig{});
  ExpectSameConfig(DefaultEngineConfig(), EngineConfig{});
  // An empty textproto file and "{}" are the same empty config.
  absl::StatusOr<EngineConfig> text = FromText("");
  ASSERT_TRUE(text.ok()) << text.status();
  ExpectSameConfig(*text, EngineConfig{});
  absl::StatusOr<EngineConfig> json = FromText("{}", Format::kJson);
  ASSERT_TRUE(json.ok()) << json.status();
  ExpectSameConfig(*json, EngineConfig{});
}

// The defaults documented in config.proto, value by value.
TEST(DefaultsTest, EqualTheDocumentedValues) {
  const EngineConfig c = DefaultEngineConfig();
  const engine::PolicyParams& p = c.default_policy;
  EXPECT_EQ(p.backoff.kind, BackoffKind::kDecorrelatedJitter);
  EXPECT_EQ(p.backoff.base, absl::Milliseconds(200));
  EXPECT_EQ(p.backoff.cap, absl::Seconds(30));
  EXPECT_EQ(p.backoff.max_attempts, 8);
  EXPECT_EQ(p.backoff.initial_jitter, absl::Milliseconds(50));
  EXPECT_EQ(p.backoff.retry_after_max, p.backoff.cap);
  EXPECT_EQ(p.backoff.horizon, absl::ZeroDuration());
  EXPECT_EQ(p.budget.ratio, 0.2);
  EXPECT_EQ(p.budget.min_retries_per_second, 10);
  EXPECT_EQ(p.budget.window, absl::Seconds(10));
  EXPECT_TRUE(p.breaker.enabled);
  EXPECT_EQ(p.breaker.consecutive_failures, 20);
  EXPECT_EQ(p.breaker.failure_ratio, 0.5);
  EXPECT_EQ(p.breaker.min_throughput, 20);
  EXPECT_EQ(p.breaker.window, absl::Seconds(10));
  EXPECT_EQ(p.breaker.open_base, absl::Milliseconds(250));
  EXPECT_EQ(p.breaker.open_max, absl::Seconds(1));
  EXPECT_EQ(p.breaker.half_open_probes, 5);
  EXPECT_EQ(p.breaker.close_after_successes, 3);
  EXPECT_EQ(p.breaker.probe_timeout, absl::Seconds(10));
  EXPECT_EQ(p.deferral.spread, absl::Seconds(1));
  EXPECT_EQ(p.deferral.release_rate_per_second, 0);  // no cap: learned
  EXPECT_TRUE(c.overrides.empty());
  EXPECT_EQ(c.limits.max_key_bytes, 512);
  EXPECT_EQ(c.limits.max_endpoints, 1000000);
  EXPECT_EQ(c.limits.idle_eviction, absl::Minutes(10));
  EXPECT_EQ(c.limits.max_batch_size, 1000);
}

TEST(DefaultsTest, RetryAfterMaxFollowsAnExplicitCap) {
  absl::StatusOr<EngineConfig> c =
      FromText("default_policy { backoff { cap { seconds: 90 } } }");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->default_policy.backoff.retry_after_max, absl::Seconds(90));
}

TEST(DefaultsTest, KindUnspecifiedMeansDecorrelatedJitter) {
  absl::StatusOr<EngineConfig> c =
      FromText("default_policy { backoff { kind: KIND_UNSPECIFIED } }");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->default_policy.backoff.kind, BackoffKind::kDecorrelatedJitter);
}

// --- Override inheritance ------------------------------------------------

TEST(OverrideInheritanceTest, OverrideWithoutPolicyIsTheDefaultPolicy) {
  absl::StatusOr<EngineConfig> c = FromText(R"pb(
    default_policy {
      backoff { kind: EQUAL_JITTER max_attempts: 3 }
      breaker { enabled: false }
    }
    overrides { glob: "*.internal" }
  )pb");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->overrides.size(), 1u);
  EngineConfig as_default;
  as_default.default_policy = c->overrides[0].policy;
  EngineConfig default_only;
  default_only.default_policy = c->default_policy;
  ExpectSameConfig(as_default, default_only);
  EXPECT_EQ(c->overrides[0].policy.backoff.kind, BackoffKind::kEqualJitter);
  EXPECT_FALSE(c->overrides[0].policy.breaker.enabled);
}

TEST(OverrideInheritanceTest, SetFieldsReplaceOnlyThemselves) {
  absl::StatusOr<EngineConfig> c = FromText(R"pb(
    default_policy {
      backoff {
        base { seconds: 1 }
        cap { seconds: 40 }
        max_attempts: 4
      }
      budget { ratio: 0.3 min_retries_per_second: 2 }
    }
    overrides {
      prefix: "https://x/"
      policy {
        backoff { max_attempts: 9 }
        budget { ratio: 1.5 }
        breaker { consecutive_failures: 3 }
      }
    }
  )pb");
  ASSERT_TRUE(c.ok()) << c.status();
  const engine::PolicyParams& o = c->overrides[0].policy;
  // Set in the override:
  EXPECT_EQ(o.backoff.max_attempts, 9);
  EXPECT_EQ(o.budget.ratio, 1.5);
  EXPECT_EQ(o.breaker.consecutive_failures, 3);
  // Inherited from default_policy (not the built-in defaults):
  EXPECT_EQ(o.backoff.base, absl::Seconds(1));
  EXPECT_EQ(o.backoff.cap, absl::Seconds(40));
  EXPECT_EQ(o.budget.min_retries_per_second, 2);
  // Unset in both: the built-in default.
  EXPECT_EQ(o.breaker.min_throughput, 20);
  EXPECT_EQ(c->overrides[0].match, PolicyOverride::Match::kPrefix);
  EXPECT_EQ(c->overrides[0].pattern, "https://x/");
}

TEST(OverrideInheritanceTest, DisableTriggersAreInheritedFieldByField) {
  absl::StatusOr<EngineConfig> c = FromText(R"pb(
    default_policy {
      disable {
        after_unavailable { seconds: 259200 }
        permanent_failures: 5
      }
    }
    overrides {
      prefix: "https://tier-b/"
      policy { disable { after_unavailable { seconds: 86400 } } }
    }
    overrides {
      prefix: "https://internal/"
      policy { disable { permanent_failures: 0 } }
    }
  )pb");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->default_policy.disable.after_unavailable, absl::Hours(72));
  EXPECT_EQ(c->default_policy.disable.window, absl::Hours(1));
  const engine::DisableParams& b = c->overrides[0].policy.disable;
  EXPECT_EQ(b.after_unavailable, absl::Hours(24));
  EXPECT_EQ(b.permanent_failures, 5);
  const engine::DisableParams& i = c->overrides[1].policy.disable;
  EXPECT_EQ(i.after_unavailable, absl::Hours(72));
  EXPECT_EQ(i.permanent_failures, 0) << "0 turns the trigger off";
  // Off by default.
  absl::StatusOr<EngineConfig> none = FromText("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->default_policy.disable.after_unavailable, absl::ZeroDuration());
  EXPECT_EQ(none->default_policy.disable.permanent_failures, 0);
}

TEST(OverrideInheritanceTest, KindUnspecifiedInAnOverrideInherits) {
  absl::StatusOr<EngineConfig> c = FromText(R"pb(
    default_policy { backoff { kind: FULL_JITTER } }
    overrides {
      prefix: "a"
      policy { backoff { kind: KIND_UNSPECIFIED } }
    }
  )pb");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->overrides[0].policy.backoff.kind, BackoffKind::kFullJitter);
}

// retry_after_max: unset everywhere -> each policy's own cap; set in
// default_policy -> inherited like any field; set in the override -> its own.
struct RamCase {
  const char* name;
  const char* text;
  absl::Duration want_default;
  absl::Duration want_override;
};

class RetryAfterMaxInheritanceTest : public ::testing::TestWithParam<RamCase> {
};

TEST_P(RetryAfterMaxInheritanceTest, FollowsTheDocumentedRule) {
  absl::StatusOr<EngineConfig> c = FromText(GetParam().text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->default_policy.backoff.retry_after_max, GetParam().want_default);
  EXPECT_EQ(c->overrides[0].policy.backoff.retry_after_max,
            GetParam().want_override);
}

INSTANTIATE_TEST_SUITE_P(
    Table, RetryAfterMaxInheritanceTest,
    ::testing::ValuesIn(std::vector<RamCase>{
        {"UnsetEverywhereFollowsEachCap",
         R"pb(overrides {
                prefix: "a"
                policy { backoff { cap { seconds: 120 } } }
              })pb",
         absl::Seconds(30), absl::Seconds(120)},
        {"UnsetEverywhereOverrideInheritsCap",
         R"pb(default_policy { backoff { cap { seconds: 45 } } }
              overrides { prefix: "a" })pb",
         absl::Seconds(45), absl::Seconds(45)},
        {"ExplicitInDefaultIsInherited",
         R"pb(default_policy { backoff { retry_after_max { seconds: 5 } } }
              overrides {
                prefix: "a"
                policy { backoff { cap { seconds: 120 } } }
              })pb",
         absl::Seconds(5), absl::Seconds(5)},
        {"ExplicitInOverrideWins",
         R"pb(default_policy { backoff { retry_after_max { seconds: 5 } } }
              overrides {
                prefix: "a"
                policy { backoff { retry_after_max { seconds: 0 } } }
              })pb",
         absl::Seconds(5), absl::ZeroDuration()},
    }),
    [](const ::testing::TestParamInfo<RamCase>& info) {
      return std::string(info.param.name);
    });

// --- Conversion errors -------------------------------------------------

struct BadProtoCase {
  const char* name;
  const char* text;
  std::string want;  // the whole message
};

class ToEngineConfigErrorTest : public ::testing::TestWithParam<BadProtoCase> {
};

TEST_P(ToEngineConfigErrorTest, NamesTheFieldPath) {
  absl::StatusOr<EngineConfig> c = FromText(GetParam().text);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ToEngineConfigErrorTest,
    ::testing::ValuesIn(std::vector<BadProtoCase>{
        {"OverrideWithoutMatch", "overrides { policy { } }",
         "overrides[0].match: set prefix or glob"},
        {"SecondOverrideWithoutMatch",
         "overrides { prefix: \"a\" } overrides { }",
         "overrides[1].match: set prefix or glob"},
        {"EmptyPrefix", "overrides { prefix: \"\" }",
         "overrides[0].prefix: must not be empty"},
        {"EmptyGlob", "overrides { glob: \"\" }",
         "overrides[0].glob: must not be empty"},
        {"UnknownKind", "default_policy { backoff { kind: 9 } }",
         "default_policy.backoff.kind: unknown value 9"},
        {"UnknownKindInOverride",
         "overrides { prefix: \"a\" policy { backoff { kind: -2 } } }",
         "overrides[0].policy.backoff.kind: unknown value -2"},
        {"NanosTooBig",
         "default_policy { backoff { base { seconds: 1 nanos: 1000000000 } } "
         "}",
         "default_policy.backoff.base: invalid duration: nanos must be in "
         "[-999999999, 999999999], got 1000000000"},
        {"SignsDiffer",
         "default_policy { breaker { window { seconds: 2 nanos: -1 } } }",
         "default_policy.breaker.window: invalid duration: seconds (2) and "
         "nanos (-1) must have the same sign"},
        {"SecondsOutOfRange",
         "limits { idle_eviction { seconds: 315576000001 } }",
         "limits.idle_eviction: invalid duration: seconds must be in "
         "[-315576000000, 315576000000], got 315576000001"},
        {"NegativeDuration",
         "default_policy { backoff { initial_jitter { seconds: -1 } } }",
         "default_policy.backoff.initial_jitter: must be in [0s, 10s], got "
         "-1s"},
        {"TinyProbeTimeoutInOverride",
         "overrides { glob: \"x\" policy { breaker { probe_timeout { nanos: 1 "
         "} } } }",
         "overrides[0].policy.breaker.probe_timeout: must be in [0.1s, "
         "600s], got 0.000000001s"},
        {"IdleEvictionZero", "limits { idle_eviction { } }",
         "limits.idle_eviction: must be in [1s, 604800s], got 0s"},
        {"RatioNaN", "default_policy { budget { ratio: nan } }",
         "default_policy.budget.ratio: must be a finite number, got nan"},
        {"RatioInf", "default_policy { budget { ratio: inf } }",
         "default_policy.budget.ratio: must be a finite number, got inf"},
        {"InheritedBaseAboveOverrideCap",
         "default_policy { backoff { base { seconds: 1 } } } overrides { "
         "prefix: \"a\" policy { backoff { cap { nanos: 500000000 } } } }",
         "overrides[0].policy.backoff.cap: must be >= base (1s), got 0.5s"},
        {"CloseAfterAboveInheritedProbes",
         "default_policy { breaker { half_open_probes: 2 "
         "close_after_successes: 1 } } overrides { prefix: \"a\" policy { "
         "breaker { close_after_successes: 3 } } }",
         "overrides[0].policy.breaker.close_after_successes: must be <= "
         "half_open_probes (2), got 3"},
        {"InheritedErrorReportedOnceAtDefaultPolicy",
         "default_policy { backoff { max_attempts: 0 } } overrides { prefix: "
         "\"a\" } overrides { prefix: \"b\" policy { backoff { "
         "max_attempts: 200 } } }",
         "default_policy.backoff.max_attempts: must be in [1, 100], got 0\n"
         "overrides[1].policy.backoff.max_attempts: must be in [1, 100], got "
         "200"},
        {"MaxEndpointsTooBig", "limits { max_endpoints: 100000001 }",
         "limits.max_endpoints: must be in [1, 100000000], got 100000001"},
        {"PermanentFailuresNegative",
         "default_policy { disable { permanent_failures: -1 } }",
         "default_policy.disable.permanent_failures: must be in [0, 1000000], "
         "got -1"},
        {"AfterUnavailableOverAMonthInOverride",
         "overrides { prefix: \"a\" policy { disable { after_unavailable { "
         "seconds: 2592001 } } } }",
         "overrides[0].policy.disable.after_unavailable: must be in [0s, "
         "2592000s], got 2592001s"},
        {"DisableWindowZero", "default_policy { disable { window { } } }",
         "default_policy.disable.window: must be in [1s, 2592000s], got 0s"},
    }),
    [](const ::testing::TestParamInfo<BadProtoCase>& info) {
      return std::string(info.param.name);
    });

TEST(ToEngineConfigErrorTest, JsonNaNIsRefusedWithItsPath) {
  absl::StatusOr<EngineConfig> c = FromText(
      R"({"overrides": [{"prefix": "a", "policy": {"budget": {"ratio": "NaN"}}}]})",
      Format::kJson);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "overrides[0].policy.budget.ratio: must be a finite number, got "
            "nan");
}

// Conversion and range errors come out together, every one with its path
// and the file name.
TEST(LoadConfigFileTest, ListsEveryErrorOfABadFile) {
  const std::string path = Testdata("bad_many.textproto");
  absl::StatusOr<EngineConfig> c = LoadConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string p = path + ": ";
  EXPECT_THAT(
      Lines(c.status().message()),
      UnorderedElementsAreArray({
          p + "default_policy.backoff.cap: must be >= base (0.2s), got 0.1s",
          p + "default_policy.backoff.max_attempts: must be in [1, 100], got 0",
          p + "default_policy.budget.ratio: must be in [0, 10], got 11",
          p + "overrides[0].match: set prefix or glob",
          // The overrides inherit default_policy's three mistakes; those
          // are reported once, at default_policy.
          p + "overrides[1].policy.backoff.kind: unknown value 9",
          p + "overrides[1].policy.breaker.failure_ratio: must be in (0, 1], "
              "got 0",
          p + "overrides[2].prefix: must not be empty",
          p + "limits.idle_eviction: invalid duration: seconds (1) and nanos "
              "(-5) must have the same sign",
          p + "limits.max_key_bytes: must be in [1, 4096], got 0",
      }));
}

// --- Parse errors: line:column -------------------------------------------

TEST(ParseErrorTest, TextprotoUnknownFieldNamesLineAndColumn) {
  const std::string path = Testdata("unknown_field.textproto");
  absl::StatusOr<v1::config::Config> c = ParseConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  // "bse" is on line 3, columns 5-7; protobuf's text parser reports the
  // position of the token after the name it refuses (the '{', column 9).
  EXPECT_THAT(std::string(c.status().message()), StartsWith(path + ":3:9: "));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("\"bse\""));
}

TEST(ParseErrorTest, JsonUnknownFieldNamesLineColumnAndPath) {
  const std::string path = Testdata("unknown_field.json");
  absl::StatusOr<v1::config::Config> c = ParseConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            path + ":4:7: default_policy.backoff.bse: unknown field");
}

TEST(ParseErrorTest, JsonTrailingCommaNamesLineAndColumn) {
  const std::string path = Testdata("syntax_error.json");
  absl::StatusOr<v1::config::Config> c = ParseConfigFile(path);
  ASSERT_FALSE(c.ok());
  // The '}' after the trailing comma: line 4, column 3.
  EXPECT_EQ(
      c.status().message(),
      path + ":4:3: expected a string key (trailing commas are not JSON)");
}

TEST(ParseErrorTest, TextprotoSyntaxErrorNamesLineAndColumn) {
  const std::string path = Testdata("syntax_error.textproto");
  absl::StatusOr<v1::config::Config> c = ParseConfigFile(path);
  ASSERT_FALSE(c.ok());
  // The '{' of limits is never closed: the parser notices at the end of
  // input, after the last line.
  EXPECT_THAT(std::string(c.status().message()), StartsWith(path + ":5:1: "));
}

struct JsonErrorCase {
  const char* name;
  const char* text;
  std::string want;
};

class JsonErrorTest : public ::testing::TestWithParam<JsonErrorCase> {};

TEST_P(JsonErrorTest, IsLocated) {
  absl::StatusOr<v1::config::Config> c =
      ParseConfigText(GetParam().text, Format::kJson);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, JsonErrorTest,
    ::testing::ValuesIn(std::vector<JsonErrorCase>{
        {"Empty", "", "1:1: unexpected end of input, expected a value"},
        {"NotJson", "limits { }",
         "1:1: unexpected character 'l', expected a value"},
        {"MissingColon", "{\n  \"limits\" {}\n}",
         "2:12: expected ':' after the key"},
        {"UnterminatedString", "{\"limits", "1:9: unterminated string"},
        {"TrailingText", "{} x", "1:4: unexpected text after the JSON value"},
        {"DuplicateKey",
         "{\"limits\": {\"maxKeyBytes\": 1,\n \"max_key_bytes\": 2}}",
         "2:2: duplicate key \"max_key_bytes\""},
        {"TrailingCommaInArray", "{\"overrides\": [{}, ]}",
         "1:20: expected a value (trailing commas are not JSON)"},
        {"LeadingZero", "{\"limits\": {\"maxKeyBytes\": 01}}",
         "1:29: leading zeros are not allowed in JSON numbers"},
        {"UnknownRootField", "{\n\"foo\": 1}", "2:1: foo: unknown field"},
        {"UnknownFieldInArray",
         "{\"overrides\": [\n {\"prefix\": \"a\"},\n {\"glob\": \"b\", "
         "\"polcy\": {}}]}",
         "3:16: overrides[1].polcy: unknown field"},
        {"WrongKind", "{\"limits\": {\n  \"maxKeyBytes\": \"1\",\n  \"idleEviction\": 600}}",
         "3:19: limits.idle_eviction: expected a duration: a string of "
         "seconds ending in \"s\", such as \"1.5s\", got 600"},
        {"OutOfRange", "{\"limits\": {\n  \"maxEndpoints\": 1e20}}",
         "2:19: limits.max_endpoints: expected an int64 (a whole number in "
         "[-9223372036854775808, 9223372036854775807]), got 1e20"},
        {"UnknownEnumName",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": \"JITTER\"}}}",
         "1:40: default_policy.backoff.kind: expected one of KIND_UNSPECIFIED, "
         "EXPONENTIAL, EQUAL_JITTER, FULL_JITTER, DECORRELATED_JITTER, or its "
         "number, got \"JITTER\""},
        {"BothPrefixAndGlob",
         "{\"overrides\": [{\"prefix\": \"a\", \"glob\": \"b\"}]}",
         "1:32: overrides[0].glob: oneof \"match\" is already set by "
         "\"prefix\"; set only one of its fields"},
        {"EveryFieldError",
         "{\"limits\": {\"maxKeyBytes\": true},\n \"bogus\": 1}",
         "1:28: limits.max_key_bytes: expected an int32 (a whole number in "
         "[-2147483648, 2147483647]), got true\n2:2: bogus: unknown field"},
    }),
    [](const ::testing::TestParamInfo<JsonErrorCase>& info) {
      return std::string(info.param.name);
    });

// What the field checks leave to protobuf's JSON parser comes out as it
// says it, after the file name, without a position: the loader does not
// read that text (json_config_test shows it for any wording).
TEST(ParseErrorTest, JsonErrorOfProtobufIsPassedThroughWithTheFileName) {
  const std::string json = "{\"limits\": {\"maxKeyBytes\": \"many\"}}";
  v1::config::Config config;
  const absl::Status protobuf = ProtobufJsonDecode(json, &config);
  ASSERT_FALSE(protobuf.ok());
  absl::StatusOr<EngineConfig> c = LoadConfigText(json, "/cfg/x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            absl::StrCat("/cfg/x.json: protobuf JSON parser: ",
                         protobuf.message()));
}

TEST(ParseErrorTest, TextprotoErrorsAreLocatedWithoutAFileName) {
  absl::StatusOr<v1::config::Config> c = ParseConfigText(
      "limits {\n  max_key_bytes: \"many\"\n}", Format::kTextproto);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), StartsWith("2:18: "));
}

// --- Files ----------------------------------------------------------------

struct ExtensionCase {
  const char* path;
  bool ok;
  Format format;
};

class FormatForPathTest : public ::testing::TestWithParam<ExtensionCase> {};

TEST_P(FormatForPathTest, ChoosesByExtension) {
  absl::StatusOr<Format> f = FormatForPath(GetParam().path);
  ASSERT_EQ(f.ok(), GetParam().ok) << f.status();
  if (f.ok()) {
    EXPECT_EQ(*f, GetParam().format);
  } else {
    EXPECT_THAT(std::string(f.status().message()),
                StartsWith(std::string(GetParam().path) + ": "));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, FormatForPathTest,
    ::testing::ValuesIn(std::vector<ExtensionCase>{
        {"/etc/stagger/config.json", true, Format::kJson},
        {"config.JSON", true, Format::kJson},
        {"/etc/stagger/config.textproto", true, Format::kTextproto},
        {"a.txtpb", true, Format::kTextproto},
        {"a.pbtxt", true, Format::kTextproto},
        {"a.cfg", true, Format::kTextproto},
        {"a.conf", true, Format::kTextproto},
        {"a.yaml", false, Format::kTextproto},
        {"config", false, Format::kTextproto},
        {"/etc/stagger.d/config", false, Format::kTextproto},
        {"json", false, Format::kTextproto},
    }));

TEST(LoadConfigFileTest, MissingFileIsNotFoundAndNamesTheFile) {
  const std::string path = Testdata("does_not_exist.textproto");
  absl::StatusOr<EngineConfig> c = LoadConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), StartsWith(path + ": "));
}

TEST(LoadConfigFileTest, UnknownExtensionNamesTheFile) {
  absl::StatusOr<EngineConfig> c = LoadConfigFile("/etc/stagger/config.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("/etc/stagger/config.yaml: unknown config file "
                         "extension \".yaml\""));
}

TEST(LoadConfigTextTest, EveryErrorLineStartsWithTheFileName) {
  absl::StatusOr<EngineConfig> c = LoadConfigText(
      "limits { max_key_bytes: 0 max_batch_size: 0 }", "/cfg/x.textproto");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Lines(c.status().message()),
              UnorderedElementsAreArray({
                  "/cfg/x.textproto: limits.max_key_bytes: must be in [1, "
                  "4096], got 0",
                  "/cfg/x.textproto: limits.max_batch_size: must be in [1, "
                  "100000], got 0",
              }));
}

TEST(LoadConfigTextTest, TooLargeIsRefused) {
  const std::string big(kMaxConfigBytes + 1, ' ');
  absl::StatusOr<EngineConfig> c = LoadConfigText(big, "/cfg/big.textproto");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("/cfg/big.textproto: larger than"));
}

}  // namespace
}  // namespace stagger::config
