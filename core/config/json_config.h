// JSON config parsing with its errors located: strict syntax
// (json_scanner.h), then the document's fields checked against the
// message's descriptor, then protobuf's JSON parser to build the message.
//
// Why the fields are checked here: protobuf's JSON parser reports a field
// path in its error TEXT and no position, and that text changes between
// protobuf releases. The descriptor is what that parser reads too, so these
// checks copy no schema; their messages and positions are ours, and no code
// reads protobuf's error text.
//
// Contract:
//  - CheckJsonFields walks a scanned document alongside `type` and reports,
//    each at its line:column with its field path (proto field names, "[i]"
//    for elements; an unknown key as written):
//      - an unknown field, at its key: a key that is neither a field's JSON
//        name (lowerCamel) nor its proto name;
//      - a value of the wrong kind, at the value: a message takes an object,
//        a string field a string, a bool true or false, a number field a
//        number, an enum a name or a number, a google.protobuf.Duration a
//        string; a repeated field's elements likewise (a single value in
//        place of the array is checked as the one element protobuf 3.21
//        takes it for). Left to protobuf: numbers and bools in strings, a
//        Duration as an object ({"seconds", "nanos"}, which 3.21 takes);
//      - an integer that is not a whole number in its type's range; an enum
//        name the enum does not have; a Duration not ending in "s", or of
//        more than 315576000000 seconds either way;
//      - a second field of one oneof, at its key.
//    null is accepted for any field (it means unset) and not looked into;
//    neither is a value once it has an error, a map, nor a well-known type
//    other than Duration. Every error is returned, in document order.
//  - Conservative: whatever CheckJsonFields reports, protobuf's JSON parser
//    refuses as well (json_config_test holds it to that, kind by kind).
//  - ParseJsonMessage: syntax, then fields, then `decode`, each step only
//    if the one before found nothing. A decoder's error is passed through
//    verbatim after "protobuf JSON parser: " (line breaks written as \n),
//    with no position and no path: the text is never looked into, so a
//    protobuf release that rewords it changes nothing else.
//  - Pure; thread-safe.
#ifndef STAGGER_CORE_CONFIG_JSON_CONFIG_H_
#define STAGGER_CORE_CONFIG_JSON_CONFIG_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/config/json_scanner.h"
#include "core/engine/validation_errors.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace stagger::config {

// An error and where it is: `at` {0, 0} if it is about the whole document;
// an empty path for a syntax error.
struct LocatedError {
  TextPosition at;
  engine::FieldError error;
};

std::vector<LocatedError> CheckJsonFields(
    const JsonValue& document, const google::protobuf::Descriptor& type);

// Fills `out` from JSON text already found valid (syntax and fields).
using JsonDecoder = absl::FunctionRef<absl::Status(
    absl::string_view json, google::protobuf::Message* out)>;

// google::protobuf::util::JsonStringToMessage, unknown fields refused.
absl::Status ProtobufJsonDecode(absl::string_view json,
                                google::protobuf::Message* out);

// Parses `text` into `out` (see the contract); no errors if it did.
std::vector<LocatedError> ParseJsonMessage(
    absl::string_view text, google::protobuf::Message* out,
    JsonDecoder decode = ProtobufJsonDecode);

}  // namespace stagger::config

#endif  // STAGGER_CORE_CONFIG_JSON_CONFIG_H_
