// JSON scanner; see json_scanner.h for the contract. A recursive-descent
// reader of the RFC 8259 grammar that builds nothing but the path ->
// position map.
#include "core/config/json_scanner.h"

#include <cstddef>
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

class Scanner {
 public:
  explicit Scanner(absl::string_view text) : s_(text) {}

  JsonScan Run() && {
    SkipWhitespace();
    if (Value("", 0)) {
      SkipWhitespace();
      if (!AtEnd()) Fail("unexpected text after the JSON value");
    }
    return std::move(result_);
  }

 private:
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

  // `open`: how many objects and arrays enclose this value.
  bool Value(const std::string& path, int open) {
    if (AtEnd()) return Fail("unexpected end of input, expected a value");
    const char c = Peek();
    if ((c == '{' || c == '[') && open >= kMaxJsonDepth) {
      return Fail(absl::StrCat("JSON nested too deeply (more than ",
                               kMaxJsonDepth, " levels)"));
    }
    switch (c) {
      case '{':
        return Object(path, open + 1);
      case '[':
        return Array(path, open + 1);
      case '"':
        return String(nullptr);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        if (c == '-' || absl::ascii_isdigit(c)) return Number();
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

  bool Object(const std::string& path, int open) {
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
      const TextPosition key_at = Here();
      std::string key;
      if (!String(&key)) return false;
      std::string name = JsonKeyToProtoName(key);
      if (!seen.insert(name).second) {
        return FailAt(key_at, absl::StrCat("duplicate key \"", key, "\""));
      }
      std::string child = path.empty() ? name : absl::StrCat(path, ".", name);
      result_.positions.emplace(child, key_at);
      SkipWhitespace();
      if (!PeekIs(':')) return Fail("expected ':' after the key");
      Advance();
      SkipWhitespace();
      if (!Value(child, open) || !Separator('}', &more)) return false;
    }
    return true;
  }

  bool Array(const std::string& path, int open) {
    Advance();  // '['
    SkipWhitespace();
    if (PeekIs(']')) {
      Advance();
      return true;
    }
    bool more = true;
    for (int i = 0; more; ++i) {
      SkipWhitespace();
      std::string child = absl::StrCat(path, "[", i, "]");
      result_.positions.emplace(child, Here());
      if (PeekIs(']')) {
        return Fail("expected a value (trailing commas are not JSON)");
      }
      if (!Value(child, open) || !Separator(']', &more)) return false;
    }
    return true;
  }

  // A string at pos_ ('"'). `out`, if given, gets the content with simple
  // escapes decoded (\u sequences are kept as written: keys are only used
  // to locate errors).
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
      if (out != nullptr) out->append(s_.data() + pos_, n);
      for (size_t i = 0; i < n; ++i) Advance();
    }
  }

  // An escape sequence at pos_ ('\\'), consumed whole.
  bool Escape(std::string* out) {
    Advance();  // '\\'
    if (AtEnd()) return Fail("unterminated string");
    const char e = Peek();
    switch (e) {
      case '"':
      case '\\':
      case '/':
        if (out != nullptr) *out += e;
        break;
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        if (out != nullptr) absl::StrAppend(out, "\\", std::string(1, e));
        break;
      case 'u':
        if (out != nullptr) *out += "\\u";
        for (int i = 0; i < 4; ++i) {
          Advance();
          if (AtEnd() || !absl::ascii_isxdigit(Peek())) {
            return Fail("\\u must be followed by 4 hex digits");
          }
          if (out != nullptr) *out += Peek();
        }
        break;
      default:
        return Fail(absl::StrCat("invalid escape '\\",
                                 absl::CEscape(std::string(1, e)), "'"));
    }
    Advance();
    return true;
  }

  bool Digits() {
    if (AtEnd() || !absl::ascii_isdigit(Peek())) {
      return Fail("expected a digit");
    }
    while (!AtEnd() && absl::ascii_isdigit(Peek())) Advance();
    return true;
  }

  bool Number() {
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

TextPosition JsonScan::Find(absl::string_view path) const {
  auto it = positions.find(path);
  return it == positions.end() ? TextPosition{} : it->second;
}

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
