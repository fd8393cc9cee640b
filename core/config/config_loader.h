// Config loading: text (textproto or JSON) -> stagger.v1.config.Config ->
// engine::EngineConfig, with every error reported where it is.
//
// Contract:
//  - Parse errors carry a 1-based "line:column" (column counted in bytes)
//    wherever the text has one. Unknown fields are errors in both formats.
//    Textproto: protobuf's text parser hands every error over with its line
//    and column (an ErrorCollector); its message is used as it is.
//    JSON (json_config.h): the text is checked as strict RFC 8259 JSON
//    (json_scanner.h: no trailing commas, no duplicate keys, no comments,
//    valid UTF-8, nesting limited), then every key and value against
//    config.proto's descriptor (unknown fields, values of the wrong kind,
//    integer ranges, enum names, durations, two fields of a oneof), each
//    error at its line:column with its field path; only then does
//    protobuf's JSON parser build the message. An error it still finds
//    (say, a number in a string that is not one) is passed through
//    verbatim, after "protobuf JSON parser: ", with no position.
//    Why not locate that one too: protobuf's JSON parser gives the field
//    path only inside its error TEXT, and no position; reading that text
//    (as this loader once did) breaks when a protobuf release rewords it.
//    Checking the fields against the descriptor ourselves places the
//    mistakes people make exactly, as textproto does, and reads no error
//    text.
//  - Conversion applies the documented defaults (engine_config.h's default
//    member values, from engine/config_ranges.h, which a test holds
//    config.proto's comments to). In an override an unset field takes
//    default_policy's effective value. retry_after_max, when unset, equals
//    the policy's cap — in an override, unless default_policy set
//    retry_after_max explicitly, in which case that value is inherited like
//    any other field. Backoff.kind KIND_UNSPECIFIED counts as unset
//    (DECORRELATED_JITTER in default_policy, inherited in an override).
//  - Every conversion error and every range error (ValidateEngineConfig) is
//    returned together, one per line, each starting with its field path as
//    in config.proto: "overrides[2].policy.backoff.cap: must be >= base
//    (0.2s), got 0.1s". An error an override only inherits from
//    default_policy (same field, same message) is reported once, at
//    default_policy. Functions that know a file name start every line
//    with it ("/etc/stagger/config.textproto: ...",
//    "/etc/stagger/config.json:3:7: ...").
//  - All functions are pure (no state) and thread-safe; the file functions
//    read the file once and follow symlinks.
#ifndef STAGGER_CORE_CONFIG_CONFIG_LOADER_H_
#define STAGGER_CORE_CONFIG_CONFIG_LOADER_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/engine/engine_config.h"
#include "stagger/v1/config.pb.h"

namespace stagger::config {

enum class Format { kTextproto, kJson };

// Config files larger than this are refused (a config is a few KB; this
// stops a wrong --config like /dev/zero from eating memory). Bytes.
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;

// .json -> kJson; .textproto/.txtpb/.pbtxt/.cfg/.conf -> kTextproto
// (case-insensitive). Anything else: InvalidArgument naming the file.
absl::StatusOr<Format> FormatForPath(absl::string_view path);

// Parses `text`. InvalidArgument with "line:column: message" lines.
absl::StatusOr<v1::config::Config> ParseConfigText(absl::string_view text,
                                                   Format format);

// Reads `path` (at most kMaxConfigBytes) without interpreting it. The error
// (NotFound, PermissionDenied, ...) names the file.
absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

// Reads and parses `path`, the format chosen by FormatForPath.
absl::StatusOr<v1::config::Config> ParseConfigFile(const std::string& path);

// Converts and validates. InvalidArgument listing every error, one per
// line, each starting with its field path.
absl::StatusOr<engine::EngineConfig> ToEngineConfig(
    const v1::config::Config& config);

// The inverse of ToEngineConfig: every field set explicitly (for printing
// the effective configuration, and so that two EngineConfigs can be
// compared as messages).
v1::config::Config ToProto(const engine::EngineConfig& config);

// Parses `text` as the contents of the file `path` (format from its
// extension) and converts it. Every error line starts with `path`. Used by
// the reloader, which reads the bytes itself to compare them.
absl::StatusOr<engine::EngineConfig> LoadConfigText(absl::string_view text,
                                                    absl::string_view path);

// ReadConfigFile + LoadConfigText.
absl::StatusOr<engine::EngineConfig> LoadConfigFile(const std::string& path);

// The embedded defaults: what staggerd runs with when no file is given.
// Equal to ToEngineConfig of an empty Config.
engine::EngineConfig DefaultEngineConfig();

}  // namespace stagger::config

#endif  // STAGGER_CORE_CONFIG_CONFIG_LOADER_H_
