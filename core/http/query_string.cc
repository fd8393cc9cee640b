#include "core/http/query_string.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/engine/key_validation.h"

namespace stagger::http {
namespace {

absl::Status Refuse(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("query: ", what));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` ('+' is a space); `what` names it in errors.
absl::StatusOr<std::string> Decode(absl::string_view in,
                                   absl::string_view what) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      const bool two = i + 2 < in.size();
      const int hi = two ? HexValue(in[i + 1]) : -1;
      const int lo = two ? HexValue(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return Refuse(absl::StrCat(what, ": '%' must be followed by two hex "
                                         "digits, at byte ",
                                   i, " of ", Quoted(in)));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
  }
  return out;
}

// Well-formed UTF-8 without control characters.
absl::Status CheckText(absl::string_view text, absl::string_view what) {
  if (engine::InvalidUtf8At(text) != absl::string_view::npos) {
    return Refuse(absl::StrCat(what, ": not well-formed UTF-8: ",
                               Quoted(text)));
  }
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return Refuse(absl::StrCat(what, ": control character in ",
                                 Quoted(text)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<absl::string_view> QueryParams::Get(
    absl::string_view name) const {
  auto it = params_.find(name);
  if (it == params_.end()) return std::nullopt;
  return absl::string_view(it->second);
}

std::string Quoted(absl::string_view bytes) {
  const bool cut = bytes.size() > kMaxQuotedBytes;
  return absl::StrCat("\"", absl::CHexEscape(bytes.substr(0, kMaxQuotedBytes)),
                      cut ? "...\"" : "\"");
}

absl::StatusOr<QueryParams> ParseQueryString(
    absl::string_view raw, const std::vector<absl::string_view>& allowed) {
  if (raw.size() > kMaxQueryBytes) {
    return Refuse(absl::StrCat(raw.size(), " bytes; at most ",
                               kMaxQueryBytes));
  }
  const std::vector<absl::string_view> pieces =
      absl::StrSplit(raw, '&', absl::SkipEmpty());
  if (pieces.size() > static_cast<size_t>(kMaxParams)) {
    return Refuse(absl::StrCat(pieces.size(), " parameters; at most ",
                               kMaxParams));
  }
  QueryParams params;
  for (absl::string_view piece : pieces) {
    const size_t eq = piece.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Refuse(absl::StrCat("want name=value, got ", Quoted(piece)));
    }
    absl::StatusOr<std::string> name = Decode(piece.substr(0, eq), "name");
    if (!name.ok()) return name.status();
    if (absl::Status s = CheckText(*name, "name"); !s.ok()) return s;
    if (std::find(allowed.begin(), allowed.end(), *name) == allowed.end()) {
      return Refuse(absl::StrCat("unknown parameter ", Quoted(*name),
                                 "; this page takes ",
                                 allowed.empty() ? std::string("none")
                                                 : absl::StrJoin(allowed, ", ")));
    }
    absl::StatusOr<std::string> value = Decode(piece.substr(eq + 1), *name);
    if (!value.ok()) return value.status();
    if (absl::Status s = CheckText(*value, *name); !s.ok()) return s;
    if (!params.params_.emplace(*name, *std::move(value)).second) {
      return Refuse(absl::StrCat(*name, ": given more than once"));
    }
  }
  return params;
}

absl::StatusOr<int> IntParam(const QueryParams& params, absl::string_view name,
                             int min, int max, int absent) {
  const std::optional<absl::string_view> v = params.Get(name);
  if (!v.has_value()) return absent;
  int n = 0;
  const bool digits = !v->empty() && v->size() <= 9 &&
                      std::all_of(v->begin(), v->end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(*v, &n) || n < min || n > max) {
    return Refuse(absl::StrCat(name, ": want an integer in [", min, ", ", max,
                               "], got ", Quoted(*v)));
  }
  return n;
}

}  // namespace stagger::http
