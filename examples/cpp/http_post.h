// Plain HTTP for the C++ example workers: one POST per attempt on a
// blocking socket (Connection: close), and JSON string quoting. Just
// enough for the examples' receivers on loopback; a real worker uses its
// own HTTP client and keeps its connections.
//
//   absl::StatusOr<HttpUrl> url = ParseHttpUrl("http://127.0.0.1:8080/hook");
//   HttpResponse r = Post(*url, body, absl::Seconds(10), "application/json");
//   // r.status (0: no answer), r.timed_out, r.retry_after (the header)
#ifndef STAGGER_EXAMPLES_CPP_HTTP_POST_H_
#define STAGGER_EXAMPLES_CPP_HTTP_POST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stagger::examples {

// `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);

struct HttpUrl {
  std::string host, port, path;
};

// "http://host:port/path" (port 80 if none); other schemes are refused,
// naming the --url flag.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

struct HttpResponse {
  int status = 0;           // 0: no response (connect error, reset)
  bool timed_out = false;   // no answer within the attempt timeout
  std::string retry_after;  // the header's value, if any
};

// POSTs `body` with `content_type`; `timeout` bounds the connect, every
// send and every receive.
HttpResponse Post(const HttpUrl& url, const std::string& body,
                  absl::Duration timeout, absl::string_view content_type);

}  // namespace stagger::examples

#endif  // STAGGER_EXAMPLES_CPP_HTTP_POST_H_
