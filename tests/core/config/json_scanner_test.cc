// Tests of core/config/json_scanner: what strict RFC 8259 JSON accepts and
// refuses, the line:column of every kind of error, the nesting limit, and
// the tree it builds: every value's kind, position and text, decoded
// strings and keys.
#include "core/config/json_scanner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::config {
namespace {

std::string Nested(int levels, const std::string& open,
                   const std::string& inner, const std::string& close) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += open;
  out += inner;
  for (int i = 0; i < levels; ++i) out += close;
  return out;
}

// --- Valid documents -------------------------------------------------------

class ValidJsonTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidJsonTest, IsAccepted) {
  const JsonScan scan = ScanJson(GetParam());
  EXPECT_FALSE(scan.error.has_value())
      << scan.error->at.line << ":" << scan.error->at.column << ": "
      << scan.error->message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidJsonTest,
    ::testing::Values(
        "{}", "[]", " \t\r\n{}\r\n ", "0", "-0", "12", "-1.5", "1e10", "1E+2",
        "-1.0e-3", "0.25", "true", "false", "null", "\"\"", "\"plain\"",
        R"("esc \" \\ \/ \b \f \n \r \t \u00e9 \uD834\uDD1E")",
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e\"",  // 2, 3, 4 bytes
        "\"\xef\xbf\xbf \xf4\x8f\xbf\xbf\"",              // U+FFFF, U+10FFFF
        R"({"a": [1, 2.5, "x", true, false, null, {}, []], "b": {"c": {}}})",
        R"({"maxKeyBytes": 1, "max_batch_size": 2})", "[[[[[[[[[[]]]]]]]]]]"));

// --- Errors, each at its line:column ------------------------------------

struct ErrorCase {
  const char* name;
  std::string text;
  int line;
  int column;
  std::string message;
};

class JsonErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(JsonErrorTest, IsReportedWhereItIs) {
  const JsonScan scan = ScanJson(GetParam().text);
  ASSERT_TRUE(scan.error.has_value());
  EXPECT_EQ(scan.error->message, GetParam().message);
  EXPECT_EQ(scan.error->at.line, GetParam().line);
  EXPECT_EQ(scan.error->at.column, GetParam().column);
}

INSTANTIATE_TEST_SUITE_P(
    Table, JsonErrorTest,
    ::testing::ValuesIn(std::vector<ErrorCase>{
        // Empty and trailing input.
        {"Empty", "", 1, 1, "unexpected end of input, expected a value"},
        {"OnlyWhitespace", " \n\t ", 2, 3,
         "unexpected end of input, expected a value"},
        {"TrailingText", "{} x", 1, 4, "unexpected text after the JSON value"},
        {"TwoValues", "{}\n{}", 2, 1, "unexpected text after the JSON value"},
        {"NotJson", "limits { }", 1, 1,
         "unexpected character 'l', expected a value"},
        {"ByteOrderMark", "\xef\xbb\xbf{}", 1, 1,
         "unexpected character '\\357', expected a value"},
        // Trailing commas.
        {"TrailingCommaInObject", "{\n  \"a\": 1,\n}", 3, 1,
         "expected a string key (trailing commas are not JSON)"},
        {"TrailingCommaInArray", "{\"overrides\": [{}, ]}", 1, 20,
         "expected a value (trailing commas are not JSON)"},
        {"LoneCommaInArray", "[,]", 1, 2,
         "unexpected character ',', expected a value"},
        // Duplicate keys, in either spelling, at the second occurrence.
        {"DuplicateKey", "{\"a\": 1, \"a\": 2}", 1, 10, "duplicate key \"a\""},
        {"DuplicateKeyCamelAndSnake",
         "{\"limits\": {\"maxKeyBytes\": 1,\n \"max_key_bytes\": 2}}", 2, 2,
         "duplicate key \"max_key_bytes\""},
        // Comments, single quotes, unquoted keys.
        {"LineCommentBeforeValue", "// c\n{}", 1, 1,
         "unexpected character '/', expected a value"},
        {"LineCommentAfterMember", "{\"a\": 1 // c\n}", 1, 9,
         "expected ',' or '}'"},
        {"BlockCommentInObject", "{/* c */}", 1, 2,
         "expected a string key (trailing commas are not JSON)"},
        {"BlockCommentInArray", "[1, /* c */ 2]", 1, 5,
         "unexpected character '/', expected a value"},
        {"SingleQuotes", "{'a': 1}", 1, 2,
         "expected a string key (trailing commas are not JSON)"},
        {"UnquotedKey", "{a: 1}", 1, 2,
         "expected a string key (trailing commas are not JSON)"},
        // Structure.
        {"MissingColon", "{\n  \"limits\" {}\n}", 2, 12,
         "expected ':' after the key"},
        {"MissingComma", "[1 2]", 1, 4, "expected ',' or ']'"},
        {"UnclosedObject", "{\"a\": 1", 1, 8,
         "unexpected end of input, expected ',' or '}'"},
        {"UnclosedArray", "[1,\n 2", 2, 3,
         "unexpected end of input, expected ',' or ']'"},
        {"MissingValue", "{\"a\": }", 1, 7,
         "unexpected character '}', expected a value"},
        {"ValueAtEnd", "{\"a\":", 1, 6,
         "unexpected end of input, expected a value"},
        // Literals.
        {"ShortLiteral", "[tru]", 1, 2, "unexpected text, expected a value"},
        {"LiteralRunsOn", "[nullx]", 1, 6, "unexpected text, expected a value"},
        {"CapitalLiteral", "True", 1, 1,
         "unexpected character 'T', expected a value"},
        // Numbers.
        {"LeadingZero", "{\"limits\": {\"maxKeyBytes\": 01}}", 1, 29,
         "leading zeros are not allowed in JSON numbers"},
        {"NegativeLeadingZero", "-012", 1, 3,
         "leading zeros are not allowed in JSON numbers"},
        {"LoneMinus", "-", 1, 2, "expected a digit"},
        {"MinusLetter", "-a", 1, 2, "expected a digit"},
        {"PlusSign", "+1", 1, 1, "unexpected character '+', expected a value"},
        {"LeadingDot", ".5", 1, 1,
         "unexpected character '.', expected a value"},
        {"TrailingDot", "1.", 1, 3, "expected a digit"},
        {"EmptyExponent", "1e", 1, 3, "expected a digit"},
        {"SignOnlyExponent", "1e+", 1, 4, "expected a digit"},
        {"Hex", "0x10", 1, 2, "unexpected text after the JSON value"},
        {"NaN", "NaN", 1, 1, "unexpected character 'N', expected a value"},
        // Strings and escapes.
        {"UnterminatedString", "{\"limits", 1, 9, "unterminated string"},
        {"UnterminatedAfterBackslash", "\"a\\", 1, 4, "unterminated string"},
        {"InvalidEscape", "\"a\\x\"", 1, 4, "invalid escape '\\x'"},
        // (the quote is shown C-escaped)
        {"EscapedSingleQuote", "\"\\'\"", 1, 3, "invalid escape '\\\\''"},
        {"ShortUnicodeEscape", "\"\\u12\"", 1, 6,
         "\\u must be followed by 4 hex digits"},
        {"NonHexUnicodeEscape", "\"\\u12g4\"", 1, 6,
         "\\u must be followed by 4 hex digits"},
        // UTF-16 surrogates only as a high-low pair, at the first backslash.
        {"LoneHighSurrogate", "[\"ab\\uD834\"]", 1, 5,
         "\\u escape of a lone UTF-16 surrogate (U+D800..U+DFFF only as a "
         "high-low pair)"},
        {"LoneLowSurrogate", "\"\\uDD1E\\uD834\"", 1, 2,
         "\\u escape of a lone UTF-16 surrogate (U+D800..U+DFFF only as a "
         "high-low pair)"},
        {"HighSurrogateThenNotLow", "\"\\ud834\\u0041\"", 1, 2,
         "\\u escape of a lone UTF-16 surrogate (U+D800..U+DFFF only as a "
         "high-low pair)"},
        {"HighSurrogateThenBadHex", "\"\\uD834\\u12\"", 1, 12,
         "\\u must be followed by 4 hex digits"},
        {"RawNewlineInString", "\"a\nb\"", 1, 3,
         "control character in string (escape it)"},
        {"RawTabInString", "[\"a\tb\"]", 1, 4,
         "control character in string (escape it)"},
        // UTF-8 (RFC 3629), at the first byte of the bad sequence.
        {"LoneContinuationByte", "\"a\x80\"", 1, 3, "invalid UTF-8 in string"},
        {"OverlongTwoBytes", "\"\xc0\xaf\"", 1, 2, "invalid UTF-8 in string"},
        {"OverlongThreeBytes", "\"\xe0\x80\xaf\"", 1, 2,
         "invalid UTF-8 in string"},
        {"Surrogate", "\"ok \xed\xa0\x80\"", 1, 5, "invalid UTF-8 in string"},
        {"AboveU10FFFF", "\"\xf4\x90\x80\x80\"", 1, 2,
         "invalid UTF-8 in string"},
        {"ByteF5", "\"\xf5\x80\x80\x80\"", 1, 2, "invalid UTF-8 in string"},
        {"TruncatedSequence", "\"\xe2\x82\"", 1, 2, "invalid UTF-8 in string"},
        {"TruncatedAtEnd", "\"\xe2\x82", 1, 2, "invalid UTF-8 in string"},
        {"BadUtf8InKey", "{\"k\xff\": 1}", 1, 4, "invalid UTF-8 in string"},
        // Lines and columns: columns count bytes, CR is a byte of its line.
        {"ColumnCountsBytes", "[\"\xc3\xa9\xc3\xa9\", x]", 1, 10,
         "unexpected character 'x', expected a value"},
        {"CrLfLines", "{\r\n\"a\": 1,\r\n}", 3, 1,
         "expected a string key (trailing commas are not JSON)"},
    }),
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return std::string(info.param.name);
    });

// --- Nesting limit ------------------------------------------------------

TEST(JsonDepthTest, AcceptsExactlyTheLimit) {
  EXPECT_FALSE(ScanJson(Nested(kMaxJsonDepth, "[", "", "]")).error);
  EXPECT_FALSE(ScanJson(Nested(kMaxJsonDepth, "[", "1", "]")).error);
  EXPECT_FALSE(ScanJson(Nested(kMaxJsonDepth - 1, "{\"a\":", "{}", "}")).error)
      << "objects count like arrays";
}

TEST(JsonDepthTest, RefusesOneLevelMoreAtTheBracketTooMany) {
  const JsonScan scan = ScanJson(Nested(kMaxJsonDepth + 1, "[", "", "]"));
  ASSERT_TRUE(scan.error.has_value());
  EXPECT_EQ(scan.error->message,
            "JSON nested too deeply (more than 64 levels)");
  EXPECT_EQ(scan.error->at.line, 1);
  EXPECT_EQ(scan.error->at.column, kMaxJsonDepth + 1);
}

TEST(JsonDepthTest, MixedObjectsAndArraysCountTogether) {
  std::string text;
  for (int i = 0; i < kMaxJsonDepth / 2; ++i) text += "{\"a\":[";
  const JsonScan ok =
      ScanJson(text + "1" + Nested(kMaxJsonDepth / 2, "", "", "]}"));
  EXPECT_FALSE(ok.error.has_value());
  const JsonScan deep =
      ScanJson(text + "{}" + Nested(kMaxJsonDepth / 2, "", "", "]}"));
  ASSERT_TRUE(deep.error.has_value());
  EXPECT_EQ(deep.error->message,
            "JSON nested too deeply (more than 64 levels)");
}

// A hostile input (a million '[') is refused at the limit, without
// recursing a million frames deep.
TEST(JsonDepthTest, HugeNestingStopsAtTheLimit) {
  const JsonScan scan = ScanJson(std::string(1000000, '['));
  ASSERT_TRUE(scan.error.has_value());
  EXPECT_EQ(scan.error->at.column, kMaxJsonDepth + 1);
}

// Wide is fine: only depth is limited.
TEST(JsonDepthTest, LongFlatArrayIsAccepted) {
  std::string text = "[0";
  for (int i = 1; i < 100000; ++i) text += ",0";
  text += "]";
  const JsonScan scan = ScanJson(text);
  EXPECT_FALSE(scan.error.has_value());
  ASSERT_EQ(scan.root.elements.size(), 100000u);
  EXPECT_EQ(scan.root.elements[99999].at, (TextPosition{1, 2 * 99999 + 2}));
}

// --- The tree ---------------------------------------------------------------

using Kind = JsonValue::Kind;

TEST(JsonTreeTest, RecordsEveryValueWithItsKindPositionAndText) {
  const JsonScan scan = ScanJson(
      "{\n"
      "  \"defaultPolicy\": {\"backoff\": {\"base\": \"1s\"}},\n"
      "  \"overrides\": [\n"
      "    {\"prefix\": \"a\"},\n"
      "    {\"glob\": \"b\", \"policy\": {}}\n"
      "  ],\n"
      "  \"n\": [-1.5e3, true, false, null]\n"
      "}");
  ASSERT_FALSE(scan.error.has_value());
  const JsonValue& root = scan.root;
  EXPECT_EQ(root.kind, Kind::kObject);
  EXPECT_EQ(root.at, (TextPosition{1, 1}));
  ASSERT_EQ(root.members.size(), 3u);
  const JsonMember& policy = root.members[0];
  EXPECT_EQ(policy.key, "defaultPolicy");
  EXPECT_EQ(policy.key_at, (TextPosition{2, 3}));
  EXPECT_EQ(policy.value.at, (TextPosition{2, 20}));
  const JsonMember& backoff = policy.value.members.at(0);
  EXPECT_EQ(backoff.key_at, (TextPosition{2, 21}));
  const JsonMember& base = backoff.value.members.at(0);
  EXPECT_EQ(base.key, "base");
  EXPECT_EQ(base.key_at, (TextPosition{2, 33}));
  EXPECT_EQ(base.value.kind, Kind::kString);
  EXPECT_EQ(base.value.text, "1s");
  EXPECT_EQ(base.value.at, (TextPosition{2, 41}));
  const JsonValue& overrides = root.members[1].value;
  EXPECT_EQ(overrides.kind, Kind::kArray);
  ASSERT_EQ(overrides.elements.size(), 2u);
  EXPECT_EQ(overrides.elements[0].at, (TextPosition{4, 5}));
  EXPECT_EQ(overrides.elements[0].members.at(0).key_at, (TextPosition{4, 6}));
  EXPECT_EQ(overrides.elements[1].members.at(1).key, "policy");
  EXPECT_EQ(overrides.elements[1].members.at(1).key_at, (TextPosition{5, 19}));
  EXPECT_TRUE(overrides.elements[1].members.at(1).value.members.empty());
  const JsonValue& n = root.members[2].value;
  ASSERT_EQ(n.elements.size(), 4u);
  EXPECT_EQ(n.elements[0].kind, Kind::kNumber);
  EXPECT_EQ(n.elements[0].text, "-1.5e3") << "numbers as written";
  EXPECT_EQ(n.elements[1].kind, Kind::kTrue);
  EXPECT_EQ(n.elements[2].kind, Kind::kFalse);
  EXPECT_EQ(n.elements[3].kind, Kind::kNull);
  EXPECT_EQ(n.elements[3].at, (TextPosition{7, 30}));
}

TEST(JsonTreeTest, ScalarRootsAreValuesToo) {
  EXPECT_EQ(ScanJson("  42").root.kind, Kind::kNumber);
  EXPECT_EQ(ScanJson("  42").root.at, (TextPosition{1, 3}));
  EXPECT_EQ(ScanJson("\"x\"").root.text, "x");
  EXPECT_EQ(ScanJson("null").root.kind, Kind::kNull);
}

TEST(JsonTreeTest, StringsAndKeysAreDecoded) {
  const JsonScan scan = ScanJson(
      R"({"a\u0062c": "q\" b\\ s\/ \b\f\n\r\t \u00e9\u20AC \uD834\uDD1E \u0000."})");
  ASSERT_FALSE(scan.error.has_value());
  ASSERT_EQ(scan.root.members.size(), 1u);
  EXPECT_EQ(scan.root.members[0].key, "abc");
  static constexpr char kWant[] =
      "q\" b\\ s/ \b\f\n\r\t \xc3\xa9\xe2\x82\xac \xf0\x9d\x84\x9e \0.";
  EXPECT_EQ(scan.root.members[0].value.text,
            std::string(kWant, sizeof(kWant) - 1));
}

TEST(JsonTreeTest, AnEscapedKeyIsADuplicateOfItsPlainSpelling) {
  const JsonScan scan = ScanJson(R"({"limits": 1, "limit\u0073": 2})");
  ASSERT_TRUE(scan.error.has_value());
  EXPECT_EQ(scan.error->message, "duplicate key \"limits\"");
  EXPECT_EQ(scan.error->at, (TextPosition{1, 15}));
}

// --- Key names --------------------------------------------------------------

TEST(JsonKeyToProtoNameTest, TurnsLowerCamelIntoSnakeCase) {
  EXPECT_EQ(JsonKeyToProtoName("maxKeyBytes"), "max_key_bytes");
  EXPECT_EQ(JsonKeyToProtoName("max_key_bytes"), "max_key_bytes");
  EXPECT_EQ(JsonKeyToProtoName("limits"), "limits");
  EXPECT_EQ(JsonKeyToProtoName(""), "");
  EXPECT_EQ(JsonKeyToProtoName("caf\xc3\xa9"), "caf\xc3\xa9");
}

}  // namespace
}  // namespace stagger::config
