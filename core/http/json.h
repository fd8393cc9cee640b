// JSON as Stagger's operator tools write it: the one definition of how a
// proto message looks in JSON (staggerctl --json and the status page's JSON
// endpoints print through it, so their field names are the same), and the
// few pieces the status page adds around messages. Pure; thread-safe.
//
// ProtoJson(m, indent): protobuf's JSON mapping with the .proto field names
// (`total_tracked`, not `totalTracked`) and every field, zeros and empty
// lists too; indented for people, compact otherwise. Should protobuf
// refuse to print it, {"error": <protobuf's message>} rather than half a
// document. (String fields must hold UTF-8, as on the wire; the engine's
// keys always do.)
//
// JsonString(text): `text` as a JSON string literal, quotes included;
// '"', '\', control characters and DEL escaped, any byte that is not part
// of well-formed UTF-8 replaced by U+FFFD.
//
// JsonTime(t): `t` as an RFC 3339 UTC string literal (protobuf's
// Timestamp form), or null for InfinitePast (never) and InfiniteFuture.
//
// WithMembers(object, members): the JSON object `object` (as ProtoJson
// prints it: "{...}") with `members` ("name": raw JSON value pairs) added
// at its end.
#ifndef STAGGER_CORE_HTTP_JSON_H_
#define STAGGER_CORE_HTTP_JSON_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

namespace stagger::http {

std::string ProtoJson(const google::protobuf::Message& m, bool indent);

std::string JsonString(absl::string_view text);

std::string JsonTime(absl::Time t);

// A member for WithMembers: name and an already-encoded JSON value.
using JsonMember = std::pair<std::string, std::string>;
std::string WithMembers(std::string object,
                        const std::vector<JsonMember>& members);

// {"error": JsonString(message)}: every JSON endpoint's error body.
std::string JsonError(absl::string_view message);

}  // namespace stagger::http

#endif  // STAGGER_CORE_HTTP_JSON_H_
