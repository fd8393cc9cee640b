// Endpoint keys: what the engine accepts as the name of an endpoint.
//
// A key is non-empty, at most `max_key_bytes` bytes (limits.max_key_bytes),
// has no control character (0x00..0x1f, 0x7f) and is well-formed UTF-8
// (RFC 3629: no overlongs, no surrogates, <= U+10FFFF): keys travel as
// proto3 strings, and in-process callers (the client's local fallback, the
// simulator) get the same answer. A printable-ASCII key, the common case, is
// checked eight bytes at a time. Pure functions: thread-safe.
#ifndef STAGGER_CORE_ENGINE_KEY_VALIDATION_H_
#define STAGGER_CORE_ENGINE_KEY_VALIDATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stagger::engine {

// OK, or InvalidArgument naming "endpoint" and what is wrong with it (the
// size and the limit, the control character and its byte, or the byte where
// the UTF-8 goes wrong).
absl::Status ValidateEndpointKey(absl::string_view key, int max_key_bytes);

// The offset of the first byte of `s` that is not part of a well-formed
// UTF-8 sequence, or absl::string_view::npos.
size_t InvalidUtf8At(absl::string_view s);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_KEY_VALIDATION_H_
