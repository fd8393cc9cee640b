// EndpointKeyFromUrl: the endpoint key a worker should send for a delivery
// URL, without the secrets URLs often carry. Chat-service webhook URLs embed
// a token in the path ("https://hooks.example.com/services/T0/B0/XXXX"),
// others put it in userinfo or the query; the endpoint key travels to the
// coordinator, shows up in GetEndpoint/ListEndpoints and in staggerctl's
// output, so it must hold only what identifies the destination.
//
// The key is  scheme "://" host [":" port] ["/" seg1 "/" ... "/" segN]:
//   * scheme and host lower-cased; an IPv6 host keeps its brackets;
//   * the port only if it is not the scheme's default (http 80, https 443);
//   * the first `path_segments` non-empty path segments (default 0: none),
//     as written (percent-encoding kept);
//   * NEVER userinfo ("user:password@"), query ("?...") or fragment ("#...").
// So "https://bot:s3cret@Hooks.Example.com:443/services/T0/B0/XXXX?sig=1"
// with path_segments = 1 is "https://hooks.example.com/services".
//
// Refused (InvalidArgument naming what is wrong): no "scheme://", a scheme
// with characters RFC 3986 does not allow, an empty host, a port that is
// not a number in 1..65535, control characters or spaces anywhere, a URL
// over kMaxUrlBytes, path_segments outside 0..kMaxPathSegments.
//
// Pure; thread-safe.
#ifndef STAGGER_CLIENT_KEY_FROM_URL_H_
#define STAGGER_CLIENT_KEY_FROM_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::client {

inline constexpr size_t kMaxUrlBytes = 8192;
inline constexpr int kMaxPathSegments = 16;

absl::StatusOr<std::string> EndpointKeyFromUrl(absl::string_view url,
                                               int path_segments = 0);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_KEY_FROM_URL_H_
