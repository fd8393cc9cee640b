#include "core/http/json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/engine/key_validation.h"
#include "google/protobuf/util/json_util.h"

namespace stagger::http {
namespace {

// `text` (well-formed UTF-8) escaped into `out`, without quotes.
void AppendEscaped(absl::string_view text, std::string* out) {
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(out, absl::StrFormat("\\u%04x", u));
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string ProtoJson(const google::protobuf::Message& m, bool indent) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = indent;
  opts.always_print_primitive_fields = true;  // zeros and empty lists too
  std::string out;
  const auto s = google::protobuf::util::MessageToJsonString(m, &out, opts);
  if (!s.ok()) return JsonError(s.ToString());
  return out;
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  while (!text.empty()) {
    const size_t bad = engine::InvalidUtf8At(text);
    if (bad == absl::string_view::npos) {
      AppendEscaped(text, &out);
      break;
    }
    AppendEscaped(text.substr(0, bad), &out);
    out.append("\\ufffd");
    text.remove_prefix(bad + 1);
  }
  out.push_back('"');
  return out;
}

std::string WithMembers(std::string object,
                        const std::vector<JsonMember>& members) {
  while (!object.empty() && object.back() != '}') object.pop_back();
  if (object.empty()) object = "{}";  // not an object: start one
  object.pop_back();
  // "{" alone, or "{...members" (a "\n" before "}" when indented).
  const bool empty = object.find_first_not_of(" \n{") == std::string::npos;
  bool first = empty;
  for (const JsonMember& m : members) {
    absl::StrAppend(&object, first ? "" : ",", JsonString(m.first), ":",
                    m.second);
    first = false;
  }
  object.push_back('}');
  return object;
}

std::string JsonTime(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return "null";
  return JsonString(
      absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone()));
}

std::string JsonError(absl::string_view message) {
  return absl::StrCat("{\"error\":", JsonString(message), "}");
}

}  // namespace stagger::http
