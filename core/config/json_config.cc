// JSON config parsing; see json_config.h for the contract.
#include "core/config/json_config.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "google/protobuf/stubs/stringpiece.h"
#include "google/protobuf/util/json_util.h"

namespace stagger::config {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::OneofDescriptor;
using Kind = JsonValue::Kind;
using Scoped = engine::ValidationErrors::ScopedField;

// google.protobuf.Duration's range, in seconds either way.
constexpr uint64_t kMaxDurationSeconds = 315576000000;
// Values quoted in messages are cut after this many bytes.
constexpr size_t kMaxShownBytes = 64;

// An integer type's range: [-negative_limit, positive_limit].
struct IntegerType {
  const char* name;
  uint64_t negative_limit;
  uint64_t positive_limit;
};
constexpr IntegerType kInt32{"an int32", uint64_t{1} << 31, (uint64_t{1} << 31) - 1};
constexpr IntegerType kInt64{"an int64", uint64_t{1} << 63, (uint64_t{1} << 63) - 1};
constexpr IntegerType kUint32{"a uint32", 0, (uint64_t{1} << 32) - 1};
constexpr IntegerType kUint64{"a uint64", 0, ~uint64_t{0}};

bool AllDigits(absl::string_view s) {
  return !s.empty() && absl::c_all_of(s, [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

// `s` cut to kMaxShownBytes, at a UTF-8 character boundary.
std::string Cut(absl::string_view s) {
  if (s.size() <= kMaxShownBytes) return std::string(s);
  size_t n = kMaxShownBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return absl::StrCat(s.substr(0, n), "...");
}

// A value as messages show it: a string quoted and escaped, a number as
// written, the rest by kind.
std::string Shown(const JsonValue& v) {
  switch (v.kind) {
    case Kind::kNull:
      return "null";
    case Kind::kTrue:
      return "true";
    case Kind::kFalse:
      return "false";
    case Kind::kNumber:
      return Cut(v.text);
    case Kind::kString:
      return absl::StrCat("\"", absl::Utf8SafeCEscape(Cut(v.text)), "\"");
    case Kind::kArray:
      return "an array";
    case Kind::kObject:
      return "an object";
  }
  return "a value";
}

// Whether the JSON number `text` is plainly not a whole number in `type`'s
// range: an integer literal is compared exactly, one with a fraction or an
// exponent as a double (so a value only just outside is left to protobuf).
bool NotIn(absl::string_view text, const IntegerType& type) {
  if (AllDigits(absl::StripPrefix(text, "-"))) {
    const bool negative = absl::ConsumePrefix(&text, "-");
    uint64_t magnitude;
    if (!absl::SimpleAtoi(text, &magnitude)) return true;  // over 2^64
    return magnitude >
           (negative ? type.negative_limit : type.positive_limit);
  }
  double d;
  if (!absl::SimpleAtod(text, &d) || !std::isfinite(d)) return true;
  return d != std::trunc(d) || d < -static_cast<double>(type.negative_limit) ||
         d > static_cast<double>(type.positive_limit);
}

const FieldDescriptor* FindField(const Descriptor& d, absl::string_view key) {
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* f = d.field(i);
    if (f->json_name() == key || f->name() == key) return f;
  }
  return nullptr;
}

std::string EnumNames(const EnumDescriptor& e) {
  std::vector<std::string> names;
  for (int i = 0; i < e.value_count(); ++i) names.push_back(e.value(i)->name());
  return absl::StrJoin(names, ", ");
}

// The oneofs of one object set so far, each with the member that set it.
using OneofsSet =
    std::vector<std::pair<const OneofDescriptor*, const JsonMember*>>;

// The walk: one error list, the field path kept by ScopedField.
class FieldChecker {
 public:
  // An object for message type `d`.
  void Message(const JsonValue& v, const Descriptor& d) {
    if (v.kind != Kind::kObject) {
      return Expected(v, absl::StrCat("an object (", d.full_name(), ")"));
    }
    OneofsSet set;
    for (const JsonMember& m : v.members) {
      const FieldDescriptor* f = FindField(d, m.key);
      if (f == nullptr) {
        Scoped field(&errors_, absl::Utf8SafeCEscape(m.key));
        Add(m.key_at, "unknown field");
        continue;
      }
      Scoped field(&errors_, f->name());
      if (m.value.kind == Kind::kNull || !OneofFree(*f, m, &set)) continue;
      if (f->is_map()) continue;
      if (f->is_repeated()) {
        Repeated(m.value, *f);
      } else {
        Singular(m.value, *f);
      }
    }
  }

  std::vector<LocatedError> Take() && {
    std::vector<LocatedError> out;
    for (size_t i = 0; i < at_.size(); ++i) {
      out.push_back({at_[i], errors_.errors()[i]});
    }
    return out;
  }

 private:
  void Add(TextPosition at, std::string message) {
    errors_.Add(message);
    at_.push_back(at);
  }
  void Expected(const JsonValue& v, absl::string_view what) {
    Add(v.at, absl::StrCat("expected ", what, ", got ", Shown(v)));
  }

  // False (and an error) if `m` sets a second field of `f`'s oneof.
  bool OneofFree(const FieldDescriptor& f, const JsonMember& m,
                 OneofsSet* set) {
    const OneofDescriptor* oneof = f.real_containing_oneof();
    if (oneof == nullptr) return true;
    for (const auto& [o, first] : *set) {
      if (o != oneof) continue;
      Add(m.key_at, absl::StrCat("oneof \"", oneof->name(),
                                 "\" is already set by \"", first->key,
                                 "\"; set only one of its fields"));
      return false;
    }
    set->emplace_back(oneof, &m);
    return true;
  }

  // An array; a single value is checked as the one element protobuf 3.21
  // takes it for.
  void Repeated(const JsonValue& v, const FieldDescriptor& f) {
    if (v.kind != Kind::kArray) return Singular(v, f);
    for (size_t i = 0; i < v.elements.size(); ++i) {
      if (v.elements[i].kind == Kind::kNull) continue;
      Scoped index(&errors_, i);
      Singular(v.elements[i], f);
    }
  }

  void Singular(const JsonValue& v, const FieldDescriptor& f) {
    const bool string = v.kind == Kind::kString;
    switch (f.cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return MessageField(v, *f.message_type());
      case FieldDescriptor::CPPTYPE_STRING:
        if (!string) Expected(v, "a string");
        return;
      case FieldDescriptor::CPPTYPE_BOOL:
        if (v.kind != Kind::kTrue && v.kind != Kind::kFalse && !string) {
          Expected(v, "true or false");
        }
        return;
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        if (v.kind != Kind::kNumber && !string) Expected(v, "a number");
        return;
      case FieldDescriptor::CPPTYPE_INT32:
        return Integer(v, kInt32);
      case FieldDescriptor::CPPTYPE_INT64:
        return Integer(v, kInt64);
      case FieldDescriptor::CPPTYPE_UINT32:
        return Integer(v, kUint32);
      case FieldDescriptor::CPPTYPE_UINT64:
        return Integer(v, kUint64);
      case FieldDescriptor::CPPTYPE_ENUM:
        return Enum(v, *f.enum_type());
    }
  }

  void MessageField(const JsonValue& v, const Descriptor& d) {
    if (d.full_name() == "google.protobuf.Duration") return Duration(v);
    if (d.file()->package() == "google.protobuf") return;  // not checked
    Message(v, d);
  }

  void Integer(const JsonValue& v, const IntegerType& type) {
    if (v.kind == Kind::kString) return;  // left to protobuf
    if (v.kind == Kind::kNumber && !NotIn(v.text, type)) return;
    Expected(v, absl::StrCat(type.name, " (a whole number in [",
                             type.negative_limit == 0 ? "" : "-",
                             type.negative_limit, ", ", type.positive_limit,
                             "])"));
  }

  void Enum(const JsonValue& v, const EnumDescriptor& e) {
    if (v.kind == Kind::kString) {
      if (e.FindValueByName(v.text) != nullptr) return;
      // A number in a string: protobuf's to judge.
      if (AllDigits(absl::StripPrefix(v.text, "-"))) return;
    } else if (v.kind == Kind::kNumber && !NotIn(v.text, kInt32)) {
      return;
    }
    Expected(v, absl::StrCat("one of ", EnumNames(e), ", or its number"));
  }

  // A string; an object ({"seconds", "nanos"}, which protobuf 3.21 takes)
  // is left to protobuf.
  void Duration(const JsonValue& v) {
    if (v.kind == Kind::kObject) return;
    if (v.kind != Kind::kString || !absl::EndsWith(v.text, "s")) {
      return Expected(v, "a duration: a string of seconds ending in \"s\", "
                         "such as \"1.5s\"");
    }
    absl::string_view s = v.text;
    s.remove_suffix(1);
    absl::ConsumePrefix(&s, "-");
    const absl::string_view seconds = s.substr(0, s.find('.'));
    uint64_t n;
    if (AllDigits(seconds) &&
        (!absl::SimpleAtoi(seconds, &n) || n > kMaxDurationSeconds)) {
      Expected(v, absl::StrCat("a duration of at most ", kMaxDurationSeconds,
                               " seconds either way"));
    }
  }

  engine::ValidationErrors errors_;
  std::vector<TextPosition> at_;  // errors_.errors()[i] is at at_[i]
};

// Protobuf's message as one line: verbatim, line breaks written as \n.
std::string OneLine(absl::string_view message) {
  return absl::StrReplaceAll(message, {{"\r", "\\r"}, {"\n", "\\n"}});
}

// Syntax, then fields: the errors, if any. (Separate from the decoding so
// that the document's tree is gone before protobuf builds the message.)
std::vector<LocatedError> CheckJson(absl::string_view text,
                                    const Descriptor& type) {
  const JsonScan scan = ScanJson(text);
  if (scan.error.has_value()) {
    return {{scan.error->at, engine::FieldError{{}, scan.error->message}}};
  }
  return CheckJsonFields(scan.root, type);
}

}  // namespace

std::vector<LocatedError> CheckJsonFields(const JsonValue& document,
                                          const Descriptor& type) {
  FieldChecker checker;
  checker.Message(document, type);
  return std::move(checker).Take();
}

absl::Status ProtobufJsonDecode(absl::string_view json,
                                google::protobuf::Message* out) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), out, options);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(status.message()));
}

std::vector<LocatedError> ParseJsonMessage(absl::string_view text,
                                           google::protobuf::Message* out,
                                           JsonDecoder decode) {
  std::vector<LocatedError> errors = CheckJson(text, *out->GetDescriptor());
  if (!errors.empty()) return errors;
  const absl::Status status = decode(text, out);
  if (status.ok()) return {};
  return {{TextPosition{},
           engine::FieldError{{},
                              absl::StrCat("protobuf JSON parser: ",
                                           OneLine(status.message()))}}};
}

}  // namespace stagger::config
