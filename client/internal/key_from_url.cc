#include "client/key_from_url.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stagger::client {
namespace {

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("url: ", what));
}

bool SchemeOk(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// "host[:port]" (IPv6 in brackets) -> lower-cased host and the port text.
absl::Status SplitHostPort(absl::string_view authority, std::string* host,
                           absl::string_view* port) {
  absl::string_view h = authority;
  *port = {};
  if (!h.empty() && h[0] == '[') {
    const size_t close = h.find(']');
    if (close == absl::string_view::npos) return Bad("unclosed '[' in the host");
    absl::string_view rest = h.substr(close + 1);
    h = h.substr(0, close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Bad("junk after the IPv6 host");
      *port = rest.substr(1);
    }
  } else if (const size_t colon = h.rfind(':'); colon != absl::string_view::npos) {
    *port = h.substr(colon + 1);
    h = h.substr(0, colon);
  }
  if (h.empty() || h == "[]") return Bad("no host");
  *host = absl::AsciiStrToLower(h);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> EndpointKeyFromUrl(absl::string_view url,
                                               int path_segments) {
  if (path_segments < 0 || path_segments > kMaxPathSegments) {
    return absl::InvalidArgumentError(absl::StrCat(
        "path_segments: must be in 0..", kMaxPathSegments, ", got ",
        path_segments));
  }
  if (url.size() > kMaxUrlBytes) {
    return Bad(absl::StrCat(url.size(), " bytes, over the limit of ",
                            kMaxUrlBytes));
  }
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return Bad("control character or space");
  }
  const size_t sep = url.find("://");
  if (sep == absl::string_view::npos) return Bad("not an absolute URL (no \"://\")");
  const absl::string_view scheme_text = url.substr(0, sep);
  if (!SchemeOk(scheme_text)) return Bad("bad scheme");
  const std::string scheme = absl::AsciiStrToLower(scheme_text);
  absl::string_view rest = url.substr(sep + 3);
  // Fragment, then query: dropped whole.
  rest = rest.substr(0, rest.find('#'));
  rest = rest.substr(0, rest.find('?'));
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  const absl::string_view path =
      slash == absl::string_view::npos ? absl::string_view() : rest.substr(slash);
  // Userinfo: everything up to the last '@' of the authority, dropped.
  if (const size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    authority = authority.substr(at + 1);
  }
  std::string host;
  absl::string_view port_text;
  if (absl::Status s = SplitHostPort(authority, &host, &port_text); !s.ok()) {
    return s;
  }
  std::string key = absl::StrCat(scheme, "://", host);
  if (!port_text.empty()) {
    int port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
      return Bad("port must be a number in 1..65535");
    }
    const bool default_port = (scheme == "https" && port == 443) ||
                              (scheme == "http" && port == 80);
    if (!default_port) absl::StrAppend(&key, ":", port);
  }
  int taken = 0;
  for (absl::string_view seg : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (taken++ == path_segments) break;
    absl::StrAppend(&key, "/", seg);
  }
  return key;
}

}  // namespace stagger::client
