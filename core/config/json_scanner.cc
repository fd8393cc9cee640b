// JSON scanner; see json_scanner.h for the contract. A recursive-descent
// reader of the RFC 8259 grammar that builds the tree of values.
#include "core/config/json_scanner.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stagger::config {
namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), 0 if there is
// none. `s` is not empty.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80;  // allowed range of the second byte
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 or F5..FF
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

// Appends code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsHighSurrogate(uint32_t u) { return u >= 0xD800 && u <= 0xDBFF; }
bool IsLowSurrogate(uint32_t u) { return u >= 0xDC00 && u <= 0xDFFF; }

class Scanner {
 public:
  explicit Scanner(absl::string_view text) : s_(text) {}

  JsonScan Run() && {
    SkipWhitespace();
    if (Value(&result_.root, 0)) {
      SkipWhitespace();
      if (!AtEnd()) Fail("unexpected text after the JSON value");
    }
    return std::move(result_);
  }

 private:
  using Kind = JsonValue::Kind;

  TextPosition Here() const {
    return {line_, static_cast<int>(pos_ - line_start_) + 1};
  }

  bool FailAt(TextPosition at, std::string message) {
    result_.error = JsonSyntaxError{at, std::move(message)};
    return false;
  }
  bool Fail(std::string message) { return FailAt(Here(), std::move(message)); }

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return s_[pos_]; }
  bool PeekIs(char c) const { return !AtEnd() && Peek() == c; }

  void Advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      Advance();
    }
  }

  // A value at pos_ into *out. `open`: how many objects and arrays enclose
  // it.
  bool Value(JsonValue* out, int open) {
    if (AtEnd()) return Fail("unexpected end of input, expected a value");
    out->at = Here();
    const char c = Peek();
    if ((c == '{' || c == '[') && open >= kMaxJsonDepth) {
      return Fail(absl::StrCat("JSON nested too deeply (more than ",
                               kMaxJsonDepth, " levels)"));
    }
    switch (c) {
      case '{':
        out->kind = Kind::kObject;
        return Object(out, open + 1);
      case '[':
        out->kind = Kind::kArray;
        return Array(out, open + 1);
      case '"':
        out->kind = Kind::kString;
        return String(&out->text);
      case 't':
        out->kind = Kind::kTrue;
        return Literal("true");
      case 'f':
        out->kind = Kind::kFalse;
        return Literal("false");
      case 'n':
        out->kind = Kind::kNull;
        return Literal("null");
      default:
        if (c == '-' || absl::ascii_isdigit(c)) {
          out->kind = Kind::kNumber;
          return Number(&out->text);
        }
        return Fail(absl::StrCat("unexpected character '",
                                 absl::CEscape(absl::string_view(&c, 1)),
                                 "', expected a value"));
    }
  }

  // After a member or element: true with *more set if a ',' follows, true
  // with *more clear if `close` does, false on anything else.
  bool Separator(char close, bool* more) {
    SkipWhitespace();
    const std::string expected =
        absl::StrCat("',' or '", std::string(1, close), "'");
    if (AtEnd()) {
      return Fail(absl::StrCat("unexpected end of input, expected ", expected));
    }
    if (Peek() != ',' && Peek() != close) {
      return Fail(absl::StrCat("expected ", expected));
    }
    *more = Peek() == ',';
    Advance();
    return true;
  }

  bool Object(JsonValue* out, int open) {
    Advance();  // '{'
    SkipWhitespace();
    if (PeekIs('}')) {
      Advance();
      return true;
    }
    absl::flat_hash_set<std::string> seen;
    for (bool more = true; more;) {
      SkipWhitespace();
      if (!PeekIs('"')) {
        return Fail("expected a string key (trailing commas are not JSON)");
      }
      JsonMember& member = out->members.emplace_back();
      member.key_at = Here();
      if (!String(&member.key)) return false;
      if (!seen.insert(JsonKeyToProtoName(member.key)).second) {
        return FailAt(member.key_at,
                      absl::StrCat("duplicate key \"",
                                   absl::Utf8SafeCEscape(member.key), "\""));
      }
      SkipWhitespace();
      if (!PeekIs(':')) return Fail("expected ':' after the key");
      Advance();
      SkipWhitespace();
      if (!Value(&member.value, open) || !Separator('}', &more)) return false;
    }
    return true;
  }

  bool Array(JsonValue* out, int open) {
    Advance();  // '['
    SkipWhitespace();
    if (PeekIs(']')) {
      Advance();
      return true;
    }
    for (bool more = true; more;) {
      SkipWhitespace();
      if (PeekIs(']')) {
        return Fail("expected a value (trailing commas are not JSON)");
      }
      if (!Value(&out->elements.emplace_back(), open) ||
          !Separator(']', &more)) {
        return false;
      }
    }
    return true;
  }

  // A string at pos_ ('"'); its content, escapes decoded, into *out.
  bool String(std::string* out) {
    Advance();  // '"'
    while (true) {
      if (AtEnd()) return Fail("unterminated string");
      const char c = Peek();
      if (c == '"') {
        Advance();
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail("control character in string (escape it)");
      }
      if (c == '\\') {
        if (!Escape(out)) return false;
        continue;
      }
      const size_t n = Utf8SequenceLength(s_.substr(pos_));
      if (n == 0) return Fail("invalid UTF-8 in string");
      out->append(s_.data() + pos_, n);
      for (size_t i = 0; i < n; ++i) Advance();
    }
  }

  // An escape sequence at pos_ ('\\'), consumed whole and decoded.
  bool Escape(std::string* out) {
    Advance();  // '\\'
    if (AtEnd()) return Fail("unterminated string");
    const char e = Peek();
    switch (e) {
      case '"':
      case '\\':
      case '/':
        *out += e;
        break;
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case 'n': *out += '\n'; break;
      case 'r': *out += '\r'; break;
      case 't': *out += '\t'; break;
      case 'u':
        return UnicodeEscape(out);
      default:
        return Fail(absl::StrCat("invalid escape '\\",
                                 absl::CEscape(std::string(1, e)), "'"));
    }
    Advance();
    return true;
  }

  // The four hex digits after "\u" (pos_ at the 'u'), consumed.
  bool Hex4(uint32_t* unit) {
    *unit = 0;
    for (int i = 0; i < 4; ++i) {
      Advance();
      if (AtEnd() || !absl::ascii_isxdigit(Peek())) {
        return Fail("\\u must be followed by 4 hex digits");
      }
      const char h = absl::ascii_tolower(Peek());
      *unit = *unit * 16 + (absl::ascii_isdigit(h) ? h - '0' : h - 'a' + 10);
    }
    Advance();
    return true;
  }

  // "\uXXXX" (pos_ at the 'u'), or a surrogate pair "\uD8xx\uDCxx", as
  // UTF-8. A surrogate alone is refused at its backslash.
  bool UnicodeEscape(std::string* out) {
    const TextPosition backslash{line_, Here().column - 1};
    const auto lone = [&] {
      return FailAt(backslash,
                    "\\u escape of a lone UTF-16 surrogate (U+D800..U+DFFF "
                    "only as a high-low pair)");
    };
    uint32_t unit;
    if (!Hex4(&unit)) return false;
    if (IsLowSurrogate(unit)) return lone();
    if (!IsHighSurrogate(unit)) {
      AppendUtf8(unit, out);
      return true;
    }
    if (s_.substr(pos_, 2) != "\\u") return lone();
    Advance();  // '\\'
    uint32_t low;
    if (!Hex4(&low)) return false;
    if (!IsLowSurrogate(low)) return lone();
    AppendUtf8(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), out);
    return true;
  }

  bool Digits() {
    if (AtEnd() || !absl::ascii_isdigit(Peek())) {
      return Fail("expected a digit");
    }
    while (!AtEnd() && absl::ascii_isdigit(Peek())) Advance();
    return true;
  }

  // A number at pos_, as written, into *out.
  bool Number(std::string* out) {
    const size_t start = pos_;
    if (Peek() == '-') Advance();
    if (AtEnd()) return Fail("expected a digit");
    if (Peek() == '0') {
      Advance();
      if (!AtEnd() && absl::ascii_isdigit(Peek())) {
        return Fail("leading zeros are not allowed in JSON numbers");
      }
    } else if (!Digits()) {
      return false;
    }
    if (PeekIs('.')) {
      Advance();
      if (!Digits()) return false;
    }
    if (PeekIs('e') || PeekIs('E')) {
      Advance();
      if (PeekIs('+') || PeekIs('-')) Advance();
      if (!Digits()) return false;
    }
    out->assign(s_.data() + start, pos_ - start);
    return true;
  }

  // true, false or null, not followed by a letter or digit.
  bool Literal(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) {
      return Fail("unexpected text, expected a value");
    }
    for (size_t i = 0; i < word.size(); ++i) Advance();
    if (!AtEnd() && absl::ascii_isalnum(Peek())) {
      return Fail("unexpected text, expected a value");
    }
    return true;
  }

  absl::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  JsonScan result_;
};

}  // namespace

JsonScan ScanJson(absl::string_view text) { return Scanner(text).Run(); }

std::string JsonKeyToProtoName(absl::string_view key) {
  std::string out;
  out.reserve(key.size() + 4);
  for (char c : key) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) {
      out += '_';
      out += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace stagger::config
