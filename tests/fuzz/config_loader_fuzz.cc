// Fuzz target config_loader: any bytes as a config file, textproto or JSON
// (the first byte's low bit picks the format; the rest is the file), through
// config::LoadConfigText as staggerd loads --config and every reload.
//
// Invariant: the file either
//   - loads into a config that passes engine::ValidateEngineConfig (what the
//     Engine CHECKs) and survives ToProto -> ToEngineConfig unchanged, or
//   - is refused with INVALID_ARGUMENT, every line of the message starting
//     with the file name, then either "L:C: " (a syntax error, 1-based) or,
//     for a file that parses, a field path as in config.proto
//     ("overrides[2].policy.backoff.cap: ...") and a non-empty message;
// never a crash, a hang, or a sanitizer report.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "core/config/config_loader.h"
#include "core/engine/engine_config.h"
#include "tests/fuzz/fuzz_support.h"

namespace stagger::fuzz {
namespace {

// "12:7: ..." -> true.
bool StartsWithLineColumn(absl::string_view s) {
  for (int part = 0; part < 2; ++part) {
    size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) {
      ++digits;
    }
    if (digits == 0 || digits == s.size() || s[digits] != ':') return false;
    s.remove_prefix(digits + 1);
  }
  return absl::StartsWith(s, " ") && s.size() > 1;
}

// "overrides[2].policy.backoff.cap: message" -> true: names as in
// config.proto (lower_snake), indexes in brackets, then a message.
bool StartsWithFieldPath(absl::string_view s) {
  const size_t colon = s.find(": ");
  if (colon == absl::string_view::npos || colon == 0 || colon + 2 >= s.size()) {
    return false;
  }
  if (!std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s.substr(0, colon)) {
    const bool ok = std::islower(static_cast<unsigned char>(c)) ||
                    std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
                    c == '.' || c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

void CheckLoaded(const engine::EngineConfig& config) {
  const absl::Status valid = engine::ValidateEngineConfig(config);
  FUZZ_CHECK(valid.ok()) << "loaded but invalid: " << valid.message();
  absl::StatusOr<engine::EngineConfig> again =
      config::ToEngineConfig(config::ToProto(config));
  FUZZ_CHECK(again.ok()) << "ToProto of a loaded config does not convert: "
                         << again.status().message();
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(
      config::ToProto(*again), config::ToProto(config)))
      << "ToProto -> ToEngineConfig changed the config";
}

void CheckRefused(const absl::Status& status, absl::string_view path,
                  bool parses) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument)
      << "refused with " << status;
  FUZZ_CHECK(!status.message().empty()) << "refused without a message";
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    FUZZ_CHECK(absl::StartsWith(line, path) && line.size() > path.size() + 2 &&
               line[path.size()] == ':')
        << "error line does not start with the file: " << line;
    absl::string_view rest = line.substr(path.size() + 1);
    if (parses) {
      FUZZ_CHECK(absl::ConsumePrefix(&rest, " ") && StartsWithFieldPath(rest))
          << "conversion error without a field path: " << line;
    } else {
      FUZZ_CHECK(StartsWithLineColumn(rest) ||
                 (absl::ConsumePrefix(&rest, " ") && !rest.empty()))
          << "syntax error line malformed: " << line;
    }
  }
}

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every non-UTF-8 string it parses or writes: expected
  // here, and noise (and time) in the fuzzer's output.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  using namespace stagger;
  if (size == 0) return 0;
  const bool json = (data[0] & 1) != 0;
  const absl::string_view path = json ? "fuzz.json" : "fuzz.textproto";
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  absl::StatusOr<engine::EngineConfig> loaded =
      config::LoadConfigText(text, path);
  if (loaded.ok()) {
    fuzz::CheckLoaded(*loaded);
    return 0;
  }
  const bool parses =
      config::ParseConfigText(text, json ? config::Format::kJson
                                         : config::Format::kTextproto)
          .ok();
  fuzz::CheckRefused(loaded.status(), path, parses);
  return 0;
}
