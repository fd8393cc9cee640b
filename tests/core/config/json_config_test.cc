// Tests of core/config/json_config: every kind of field error
// CheckJsonFields reports, with its line:column, path and message, each
// held to the contract that protobuf's JSON parser refuses that document
// too; what it leaves alone (and protobuf accepts); and ParseJsonMessage's
// steps: a decoder is called only for a document that checked out, and its
// error comes out verbatim whatever its wording, never located or
// rephrased: the loader does not read protobuf's error text.
#include "core/config/json_config.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stagger/v1/config.pb.h"

namespace stagger::config {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

// "L:C: path: message" per error (as the loader renders them, file aside).
std::vector<std::string> Rendered(const std::vector<LocatedError>& errors) {
  std::vector<std::string> out;
  for (const LocatedError& e : errors) {
    out.push_back(
        absl::StrCat(e.at.line, ":", e.at.column, ": ", e.error.ToString()));
  }
  return out;
}

std::vector<std::string> Check(const std::string& json) {
  const JsonScan scan = ScanJson(json);
  EXPECT_FALSE(scan.error.has_value()) << scan.error->message;
  return Rendered(
      CheckJsonFields(scan.root, *v1::config::Config::descriptor()));
}

absl::Status Protobuf(const std::string& json) {
  v1::config::Config config;
  return ProtobufJsonDecode(json, &config);
}

// --- Every kind of error, where it is -------------------------------------

struct FieldErrorCase {
  const char* name;
  std::string json;
  std::vector<std::string> want;
};

class FieldErrorTest : public ::testing::TestWithParam<FieldErrorCase> {};

TEST_P(FieldErrorTest, IsReportedAtItsPlaceWithItsPath) {
  EXPECT_THAT(Check(GetParam().json), ElementsAreArray(GetParam().want));
}

// The contract's "conservative": nothing reported here is a document the
// protobuf JSON parser would have taken.
TEST_P(FieldErrorTest, ProtobufRefusesTheDocumentToo) {
  EXPECT_FALSE(Protobuf(GetParam().json).ok())
      << "reported, but protobuf accepts: " << GetParam().json;
}

const char kInt32Range[] = "an int32 (a whole number in [-2147483648, 2147483647])";
const char kInt64Range[] =
    "an int64 (a whole number in [-9223372036854775808, 9223372036854775807])";
const char kKinds[] =
    "one of KIND_UNSPECIFIED, EXPONENTIAL, EQUAL_JITTER, FULL_JITTER, "
    "DECORRELATED_JITTER, or its number";
const char kDuration[] =
    "a duration: a string of seconds ending in \"s\", such as \"1.5s\"";

INSTANTIATE_TEST_SUITE_P(
    Table, FieldErrorTest,
    ::testing::ValuesIn(std::vector<FieldErrorCase>{
        // Unknown fields, at the key, named as written.
        {"UnknownAtTheRoot", "{\n\"foo\": 1}", {"2:1: foo: unknown field"}},
        {"UnknownNested",
         "{\"defaultPolicy\": {\"backoff\": {\n    \"bse\": \"1s\"}}}",
         {"2:5: default_policy.backoff.bse: unknown field"}},
        {"UnknownWithANullValue", "{\"limits\": {\"maxKeyBytez\": null}}",
         {"1:13: limits.maxKeyBytez: unknown field"}},
        {"HalfCamelHalfSnakeIsNoName", "{\"limits\": {\"max_keyBytes\": 1}}",
         {"1:13: limits.max_keyBytes: unknown field"}},
        {"UnknownInTheSecondOverride",
         "{\"overrides\": [\n {\"prefix\": \"a\"},\n {\"glob\": \"b\", "
         "\"polcy\": {}}]}",
         {"3:16: overrides[1].polcy: unknown field"}},
        // Wrong kinds, at the value.
        {"RootNotAnObject", "  []",
         {"1:3: expected an object (stagger.v1.config.Config), got an "
          "array"}},
        {"MessageGivenAString", "{\"limits\": \"none\"}",
         {"1:12: limits: expected an object (stagger.v1.config.Limits), got "
          "\"none\""}},
        {"MessageGivenAnArray", "{\"defaultPolicy\": []}",
         {"1:19: default_policy: expected an object "
          "(stagger.v1.config.Policy), got an array"}},
        // A single value for a repeated field is checked as the element
        // protobuf 3.21 takes it for (a stricter protobuf refuses it whole).
        {"RepeatedGivenABadElement",
         "{\"overrides\": {\"prefix\": \"a\", \"polcy\": {}}}",
         {"1:31: overrides.polcy: unknown field"}},
        {"RepeatedGivenAString", "{\"overrides\": \"a\"}",
         {"1:15: overrides: expected an object (stagger.v1.config.Override), "
          "got \"a\""}},
        {"ElementNotAnObject", "{\"overrides\": [{}, \"a\"]}",
         {"1:20: overrides[1]: expected an object "
          "(stagger.v1.config.Override), got \"a\""}},
        {"StringGivenANumber", "{\"overrides\": [{\"prefix\": 5}]}",
         {"1:27: overrides[0].prefix: expected a string, got 5"}},
        {"BoolGivenANumber",
         "{\"defaultPolicy\": {\"breaker\": {\"enabled\": 1}}}",
         {"1:43: default_policy.breaker.enabled: expected true or false, got "
          "1"}},
        {"DoubleGivenABool",
         "{\"defaultPolicy\": {\"budget\": {\"ratio\": true}}}",
         {"1:40: default_policy.budget.ratio: expected a number, got true"}},
        {"DoubleGivenAnObject",
         "{\"defaultPolicy\": {\"budget\": {\"ratio\": {}}}}",
         {"1:40: default_policy.budget.ratio: expected a number, got an "
          "object"}},
        // Integers: whole, and in their type's range.
        {"Int32WithAFraction",
         "{\"defaultPolicy\": {\"backoff\": {\"maxAttempts\": 1.5}}}",
         {absl::StrCat("1:47: default_policy.backoff.max_attempts: expected ",
                       kInt32Range, ", got 1.5")}},
        {"Int32TooBig", "{\"limits\": {\"maxKeyBytes\": 2147483648}}",
         {absl::StrCat("1:28: limits.max_key_bytes: expected ", kInt32Range,
                       ", got 2147483648")}},
        {"Int32TooSmall", "{\"limits\": {\"maxKeyBytes\": -2147483649}}",
         {absl::StrCat("1:28: limits.max_key_bytes: expected ", kInt32Range,
                       ", got -2147483649")}},
        {"Int32GivenAnObject", "{\"limits\": {\"maxBatchSize\": {}}}",
         {absl::StrCat("1:29: limits.max_batch_size: expected ", kInt32Range,
                       ", got an object")}},
        {"Int64AsAHugeExponent", "{\"limits\": {\n  \"maxEndpoints\": 1e20}}",
         {absl::StrCat("2:19: limits.max_endpoints: expected ", kInt64Range,
                       ", got 1e20")}},
        {"Int64OneOverTheTop",
         "{\"limits\": {\"maxEndpoints\": 9223372036854775808}}",
         {absl::StrCat("1:29: limits.max_endpoints: expected ", kInt64Range,
                       ", got 9223372036854775808")}},
        {"Int64OverUint64", "{\"limits\": {\"maxEndpoints\": -99999999999999999999}}",
         {absl::StrCat("1:29: limits.max_endpoints: expected ", kInt64Range,
                       ", got -99999999999999999999")}},
        // Enums: a name the enum has, or a number.
        {"EnumUnknownName",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": \"FULL\"}}}",
         {absl::StrCat("1:40: default_policy.backoff.kind: expected ", kKinds,
                       ", got \"FULL\"")}},
        {"EnumNameInLowerCase",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": \"full_jitter\"}}}",
         {absl::StrCat("1:40: default_policy.backoff.kind: expected ", kKinds,
                       ", got \"full_jitter\"")}},
        {"EnumWithAFraction",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": 2.5}}}",
         {absl::StrCat("1:40: default_policy.backoff.kind: expected ", kKinds,
                       ", got 2.5")}},
        {"EnumGivenABool",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": true}}}",
         {absl::StrCat("1:40: default_policy.backoff.kind: expected ", kKinds,
                       ", got true")}},
        // Durations: a string ending in "s", within 10000 years.
        {"DurationAsANumber",
         "{\"defaultPolicy\": {\"backoff\": {\"base\": 5}}}",
         {absl::StrCat("1:40: default_policy.backoff.base: expected ",
                       kDuration, ", got 5")}},
        {"DurationInMinutes",
         "{\"defaultPolicy\": {\"backoff\": {\"base\": \"5m\"}}}",
         {absl::StrCat("1:40: default_policy.backoff.base: expected ",
                       kDuration, ", got \"5m\"")}},
        {"DurationWithoutUnit", "{\"limits\": {\"idleEviction\": \"1.5\"}}",
         {absl::StrCat("1:29: limits.idle_eviction: expected ", kDuration,
                       ", got \"1.5\"")}},
        {"DurationAsAnArray", "{\"limits\": {\"idleEviction\": [\"5s\"]}}",
         {absl::StrCat("1:29: limits.idle_eviction: expected ", kDuration,
                       ", got an array")}},
        {"DurationTooLong", "{\"limits\": {\"idleEviction\": \"315576000001s\"}}",
         {"1:29: limits.idle_eviction: expected a duration of at most "
          "315576000000 seconds either way, got \"315576000001s\""}},
        {"NegativeDurationTooLong",
         "{\"limits\": {\"idleEviction\": \"-400000000000.5s\"}}",
         {"1:29: limits.idle_eviction: expected a duration of at most "
          "315576000000 seconds either way, got \"-400000000000.5s\""}},
        // A oneof: the second field, at its key.
        {"BothPrefixAndGlob",
         "{\"overrides\": [{\"prefix\": \"a\", \"glob\": \"b\"}]}",
         {"1:32: overrides[0].glob: oneof \"match\" is already set by "
          "\"prefix\"; set only one of its fields"}},
        // Long values are cut in the message.
        {"LongValueIsCut",
         absl::StrCat("{\"limits\": \"", std::string(100, 'x'), "\"}"),
         {absl::StrCat("1:12: limits: expected an object "
                       "(stagger.v1.config.Limits), got \"",
                       std::string(64, 'x'), "...\"")}},
        // Every error, in document order; nothing below an error.
        {"SeveralInDocumentOrder",
         "{\"defaultPolicy\": {\"backoff\": {\"kind\": \"X\", \"bse\": "
         "\"1s\"}},\n \"overrides\": [{\"glob\": 1, \"policy\": []}],\n "
         "\"limits\": {\"maxEndpoints\": 1.5, \"x\": {\"y\": 1}}}",
         {absl::StrCat("1:40: default_policy.backoff.kind: expected ", kKinds,
                       ", got \"X\""),
          "1:45: default_policy.backoff.bse: unknown field",
          "2:25: overrides[0].glob: expected a string, got 1",
          "2:38: overrides[0].policy: expected an object "
          "(stagger.v1.config.Policy), got an array",
          absl::StrCat("3:29: limits.max_endpoints: expected ", kInt64Range,
                       ", got 1.5"),
          "3:34: limits.x: unknown field"}},
    }),
    [](const ::testing::TestParamInfo<FieldErrorCase>& info) {
      return std::string(info.param.name);
    });

// --- What is left alone --------------------------------------------------

class AcceptedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AcceptedTest, NoErrorAndProtobufTakesItToo) {
  EXPECT_THAT(Check(GetParam()), IsEmpty());
  const absl::Status s = Protobuf(GetParam());
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Table, AcceptedTest,
    ::testing::Values(
        "{}",
        // Either spelling of a name; null for anything.
        R"({"limits": {"max_key_bytes": 1, "maxBatchSize": 2}})",
        R"({"defaultPolicy": null, "overrides": null, "limits": {"maxKeyBytes": null}})",
        R"({"overrides": [{"prefix": null, "glob": "b"}]})",
        // Numbers: in strings, whole in any notation, at the range's ends.
        R"({"limits": {"maxEndpoints": "50000", "maxKeyBytes": 1e3}})",
        R"({"limits": {"maxKeyBytes": -2147483648, "maxBatchSize": 2147483647}})",
        R"({"limits": {"maxEndpoints": 9223372036854775807}})",
        R"({"defaultPolicy": {"budget": {"ratio": "NaN", "minRetriesPerSecond": 1e-3}}})",
        // Enums by name or number (an unknown number is the converter's).
        R"({"defaultPolicy": {"backoff": {"kind": "FULL_JITTER"}}})",
        R"({"defaultPolicy": {"backoff": {"kind": 9}}})",
        // Durations, and a oneof set once.
        R"({"defaultPolicy": {"backoff": {"base": "0.5s", "cap": "-315576000000s"}}})",
        R"({"overrides": [{"glob": "b"}, {"prefix": "a"}]})",
        // Forms protobuf 3.21 takes beyond its JSON mapping: one element
        // for a repeated field, a Duration as {"seconds", "nanos"}.
        R"({"overrides": {"prefix": "a"}})",
        R"({"limits": {"idleEviction": {"seconds": 5}}})"));

// The scanner refuses a \u escape of a lone surrogate (it needs decoded
// keys and values); protobuf's parser refused those documents already.
TEST(StrictnessTest, LoneSurrogatesWereRefusedByProtobufToo) {
  for (const std::string json :
       {R"({"overrides": [{"prefix": "a\uD834"}]})",
        R"({"overrides": [{"prefix": "\uDD1Ea"}]})",
        R"({"overrides": [{"glob": "\uD834\u0041"}]})"}) {
    EXPECT_TRUE(ScanJson(json).error.has_value()) << json;
    EXPECT_FALSE(Protobuf(json).ok()) << json;
  }
}

// --- ParseJsonMessage: the steps, and protobuf's text left unread ---------

// A decoder that counts its calls and fails with `message`.
struct FakeDecoder {
  std::string message;
  mutable int calls = 0;
  absl::Status operator()(absl::string_view,
                          google::protobuf::Message*) const {
    ++calls;
    return absl::InvalidArgumentError(message);
  }
};

TEST(ParseJsonMessageTest, ASyntaxErrorStopsBeforeTheFields) {
  v1::config::Config config;
  FakeDecoder decoder{"never"};
  const std::vector<LocatedError> errors =
      ParseJsonMessage("{\"foo\": 1,}", &config, decoder);
  EXPECT_THAT(Rendered(errors),
              ElementsAreArray({"1:11: expected a string key (trailing "
                                "commas are not JSON)"}));
  EXPECT_EQ(decoder.calls, 0);
}

TEST(ParseJsonMessageTest, AFieldErrorStopsBeforeTheDecoder) {
  v1::config::Config config;
  FakeDecoder decoder{"never"};
  const std::vector<LocatedError> errors =
      ParseJsonMessage("{\"foo\": 1}", &config, decoder);
  EXPECT_THAT(Rendered(errors), ElementsAreArray({"1:2: foo: unknown field"}));
  EXPECT_EQ(decoder.calls, 0);
}

// Whatever the decoder says, the result is that text, unplaced and
// unparsed: the first wording is the one the loader used to cut a field
// path and a position out of; now it is not looked into.
TEST(ParseJsonMessageTest, ADecoderErrorComesOutVerbatimWhateverItsWording) {
  const std::string json = R"({"limits": {"maxEndpoints": "many"}})";
  for (const std::string wording :
       {"(limits.max_endpoints): invalid value \"many\" for type TYPE_INT64",
        "limits.max_endpoints: Cannot find field.",
        "(limits) maxEndpoints: whatever a newer protobuf says",
        "two lines\nof text\r\n", ""}) {
    v1::config::Config config;
    FakeDecoder decoder{wording};
    const std::vector<LocatedError> errors =
        ParseJsonMessage(json, &config, decoder);
    EXPECT_EQ(decoder.calls, 1);
    ASSERT_EQ(errors.size(), 1u) << wording;
    EXPECT_EQ(errors[0].at, TextPosition{}) << wording;
    EXPECT_THAT(errors[0].error.path, IsEmpty()) << wording;
    EXPECT_EQ(errors[0].error.message,
              "protobuf JSON parser: " +
                  absl::StrReplaceAll(wording, {{"\r", "\\r"}, {"\n", "\\n"}}));
  }
}

TEST(ParseJsonMessageTest, ProtobufsOwnErrorIsPassedThrough) {
  const std::string json = R"({"limits": {"maxEndpoints": "many"}})";
  const absl::Status protobuf = Protobuf(json);
  ASSERT_FALSE(protobuf.ok());
  v1::config::Config config;
  EXPECT_THAT(Rendered(ParseJsonMessage(json, &config)),
              ElementsAreArray({absl::StrCat("0:0: protobuf JSON parser: ",
                                             protobuf.message())}));
}

TEST(ParseJsonMessageTest, AGoodDocumentIsDecoded) {
  v1::config::Config config;
  EXPECT_THAT(ParseJsonMessage(R"({"limits": {"maxKeyBytes": 7}})", &config),
              IsEmpty());
  EXPECT_EQ(config.limits().max_key_bytes(), 7);
}

}  // namespace
}  // namespace stagger::config
