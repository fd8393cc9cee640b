// JSON scanner: a strict RFC 8259 syntax check that also records where each
// field of the document is, so that an error found later (by the protobuf
// JSON parser, which reports field paths but no positions) can be given a
// line and column.
//
// Contract:
//  - ScanJson accepts exactly one RFC 8259 value with optional surrounding
//    whitespace (space, tab, CR, LF). Refused, each with a message saying
//    what was wrong: trailing commas, comments, single quotes, unquoted
//    keys, leading zeros, control characters in strings, invalid escapes
//    (\u needs four hex digits), invalid UTF-8 anywhere in the text,
//    anything after the value, empty input, and nesting deeper than
//    kMaxJsonDepth.
//  - Keys are compared and recorded by their proto field name: "maxKeyBytes"
//    and "max_key_bytes" are the same key (JsonKeyToProtoName), so a
//    duplicate key is refused in either spelling.
//  - Positions are 1-based; the column counts bytes. An error is reported at
//    the first byte that cannot belong to valid JSON (a duplicate key: at
//    the second occurrence's opening quote). Scanning stops at the first
//    error.
//  - On success, positions maps the path of every key and array element, in
//    the protobuf JSON parser's notation ("limits.max_key_bytes",
//    "overrides[1].policy"), to where it starts: a key's opening quote, an
//    element's first byte. The root has no entry.
//  - Pure; thread-safe. Work and memory are linear in the input; recursion
//    depth is at most kMaxJsonDepth + 1 frames.
#ifndef STAGGER_CORE_CONFIG_JSON_SCANNER_H_
#define STAGGER_CORE_CONFIG_JSON_SCANNER_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
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

struct JsonScan {
  // The first syntax error; unset if the text is valid JSON.
  std::optional<JsonSyntaxError> error;
  // Path -> position of every key and array element (see the contract).
  // Incomplete when `error` is set.
  absl::flat_hash_map<std::string, TextPosition> positions;

  // positions[path], or {0, 0} if the path is not in the document.
  TextPosition Find(absl::string_view path) const;
};

JsonScan ScanJson(absl::string_view text);

// The proto field name the protobuf JSON parser reads a key as: lowerCamel
// is turned into snake_case ("maxKeyBytes" -> "max_key_bytes"); a key
// without capitals is unchanged.
std::string JsonKeyToProtoName(absl::string_view key);

}  // namespace stagger::config

#endif  // STAGGER_CORE_CONFIG_JSON_SCANNER_H_
