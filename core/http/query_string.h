// QueryString: the query of one HTTP GET (`?page_size=100&page_token=ab`)
// as named parameters, for the status pages' JSON endpoints. The one place
// that reads a query: what a browser (URLSearchParams) sends parses, and
// anything else gets a clear refusal instead of a guess. Pure functions;
// thread-safe.
//
// ParseQueryString(raw, allowed): `raw` is the text after '?', as received
// (not decoded). It is split on '&' (empty pieces are skipped), each piece
// on its first '=' into a name and a value, and both are percent-decoded
// ('+' is a space). Refused with InvalidArgument, the message starting
// "query: " and naming the parameter where there is one:
//   - more than kMaxQueryBytes bytes, or more than kMaxParams parameters;
//   - a piece without '=', or with an empty name;
//   - a '%' not followed by two hex digits;
//   - a name not in `allowed`, or given twice;
//   - a decoded name or value that is not well-formed UTF-8 or holds a
//     control character (0x00..0x1f, 0x7f).
// Bytes from the query are quoted in messages C-escaped and cut to
// kMaxQuotedBytes, so a message is printable ASCII whatever was sent.
//
// IntParam: a parameter that is a decimal integer in [min, max] (digits
// only, at most 9 of them), or `absent` when the query does not name it.
#ifndef STAGGER_CORE_HTTP_QUERY_STRING_H_
#define STAGGER_CORE_HTTP_QUERY_STRING_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::http {

inline constexpr size_t kMaxQueryBytes = 8192;
inline constexpr int kMaxParams = 16;
inline constexpr size_t kMaxQuotedBytes = 40;

class QueryParams {
 public:
  // The decoded value of `name`, or nullopt if the query does not name it.
  std::optional<absl::string_view> Get(absl::string_view name) const;
  size_t size() const { return params_.size(); }

 private:
  friend absl::StatusOr<QueryParams> ParseQueryString(
      absl::string_view raw, const std::vector<absl::string_view>& allowed);
  std::map<std::string, std::string, std::less<>> params_;
};

absl::StatusOr<QueryParams> ParseQueryString(
    absl::string_view raw, const std::vector<absl::string_view>& allowed);

absl::StatusOr<int> IntParam(const QueryParams& params, absl::string_view name,
                             int min, int max, int absent);

// `bytes` C-escaped and cut to kMaxQuotedBytes ("..." marks a cut), in
// double quotes: how messages quote what a client sent.
std::string Quoted(absl::string_view bytes);

}  // namespace stagger::http

#endif  // STAGGER_CORE_HTTP_QUERY_STRING_H_
