// JSON scanner: a strict RFC 8259 syntax check that also builds the
// document as a tree of values, each with where it is, so that the fields
// can be checked against a message's descriptor with line and column
// (json_config.h).
//
// Contract:
//  - ScanJson accepts exactly one RFC 8259 value with optional surrounding
//    whitespace (space, tab, CR, LF). Refused, each with a message saying
//    what was wrong: trailing commas, comments, single quotes, unquoted
//    keys, leading zeros, control characters in strings, invalid escapes
//    (\u needs four hex digits; a UTF-16 surrogate only as a high-low
//    pair), invalid UTF-8 anywhere in the text, anything after the value,
//    empty input, and nesting deeper than kMaxJsonDepth.
//  - Keys are compared by their snake_case spelling (JsonKeyToProtoName):
//    "maxKeyBytes" and "max_key_bytes" are the same key, so a duplicate key
//    is refused in either spelling.
//  - Positions are 1-based; the column counts bytes. An error is reported at
//    the first byte that cannot belong to valid JSON (a duplicate key: at
//    the second occurrence's opening quote). Scanning stops at the first
//    error.
//  - On success, `root` is the document: every value with its kind and
//    first byte, strings with their escapes decoded (UTF-8), numbers as
//    written, object members in document order with their keys (decoded)
//    and each key's opening quote.
//  - Pure; thread-safe. Work and memory are linear in the input (one node
//    per value); recursion depth is at most kMaxJsonDepth + 1 frames.
#ifndef STAGGER_CORE_CONFIG_JSON_SCANNER_H_
#define STAGGER_CORE_CONFIG_JSON_SCANNER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace stagger::config {

// Objects and arrays may nest this deep: the root value is depth 0, so
// kMaxJsonDepth brackets may be open at once. A Stagger config needs 6.
inline constexpr int kMaxJsonDepth = 64;

// A place in the text. 1-based; {0, 0} means unknown.
struct TextPosition {
  int line = 0;
  int column = 0;
  bool operator==(const TextPosition& o) const {
    return line == o.line && column == o.column;
  }
};

struct JsonSyntaxError {
  TextPosition at;
  std::string message;  // e.g. "expected ':' after the key"
};

struct JsonMember;

// One value of the document.
struct JsonValue {
  enum class Kind { kNull, kTrue, kFalse, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  TextPosition at;                  // its first byte
  std::string text;                 // kString: decoded; kNumber: as written
  std::vector<JsonMember> members;  // kObject, in document order
  std::vector<JsonValue> elements;  // kArray
};

struct JsonMember {
  std::string key;      // decoded
  TextPosition key_at;  // its opening quote
  JsonValue value;
};

struct JsonScan {
  // The first syntax error; unset if the text is valid JSON.
  std::optional<JsonSyntaxError> error;
  // The document (see the contract). Incomplete when `error` is set.
  JsonValue root;
};

JsonScan ScanJson(absl::string_view text);

// A key's snake_case spelling, the one duplicates are found by: lowerCamel
// is turned into snake_case ("maxKeyBytes" -> "max_key_bytes"); a key
// without capitals is unchanged.
std::string JsonKeyToProtoName(absl::string_view key);

}  // namespace stagger::config

#endif  // STAGGER_CORE_CONFIG_JSON_SCANNER_H_
