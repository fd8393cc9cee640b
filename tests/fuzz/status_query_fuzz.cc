// Fuzz target status_query: the status pages' query parser
// (core/http/query_string.h, ParseQueryString and IntParam), which reads
// whatever an HTTP client puts after '?'.
//
// Input: [mode: 1 byte] then the rest is the raw query, as received. The
// mode's low bit picks the allowed names (the endpoints page's
// filter/page_size/page_token, or /api/endpoint's key).
//
// Invariants: a refusal is InvalidArgument, starts "query: ", is printable
// ASCII and at most 400 bytes (bytes from the query are quoted escaped and
// cut); an accepted query has at most kMaxParams parameters, all of allowed
// names, with well-formed UTF-8 values free of control characters; and
// percent-encoding those values again parses back to exactly them.
// IntParam on an accepted query answers an integer within its range or a
// refusal, never anything else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/engine/key_validation.h"
#include "core/http/query_string.h"
#include "tests/fuzz/fuzz_support.h"

namespace stagger::fuzz {
namespace {

std::string Encode(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) absl::StrAppend(&out, absl::StrFormat("%%%02X", c));
  return out;
}

void CheckRefusal(const absl::Status& s) {
  FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument) << s;
  FUZZ_CHECK(absl::StartsWith(s.message(), "query: ")) << s;
  FUZZ_CHECK(s.message().size() <= 400) << s.message().size();
  for (char c : s.message()) FUZZ_CHECK(c >= 0x20 && c < 0x7f) << s;
}

void CheckAccepted(const http::QueryParams& q,
                   const std::vector<absl::string_view>& allowed) {
  FUZZ_CHECK(q.size() <= static_cast<size_t>(http::kMaxParams)) << q.size();
  std::string again;
  size_t named = 0;
  for (absl::string_view name : allowed) {
    const std::optional<absl::string_view> v = q.Get(name);
    if (!v.has_value()) continue;
    ++named;
    FUZZ_CHECK(engine::InvalidUtf8At(*v) == absl::string_view::npos) << *v;
    for (char c : *v) {
      const unsigned char u = static_cast<unsigned char>(c);
      FUZZ_CHECK(u >= 0x20 && u != 0x7f) << "control byte " << int{u};
    }
    absl::StrAppend(&again, again.empty() ? "" : "&", name, "=", Encode(*v));
  }
  FUZZ_CHECK(named == q.size()) << "a parameter outside the allowed names";
  if (again.size() > http::kMaxQueryBytes) return;
  absl::StatusOr<http::QueryParams> round = http::ParseQueryString(again, allowed);
  FUZZ_CHECK(round.ok()) << round.status();
  for (absl::string_view name : allowed) {
    FUZZ_CHECK(round->Get(name) == q.Get(name)) << name;
  }
  absl::StatusOr<int> n = http::IntParam(q, "page_size", 1, 1000, 100);
  if (n.ok()) {
    FUZZ_CHECK(*n >= 1 && *n <= 1000) << *n;
  } else {
    CheckRefusal(n.status());
  }
}

}  // namespace
}  // namespace stagger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagger::fuzz;
  ByteReader in(data, size);
  const bool endpoint_page = (in.Take<uint8_t>() & 1) == 0;
  const std::vector<absl::string_view> allowed =
      endpoint_page
          ? std::vector<absl::string_view>{"filter", "page_size", "page_token"}
          : std::vector<absl::string_view>{"key"};
  const std::string raw = in.Rest(in.left());
  absl::StatusOr<stagger::http::QueryParams> q =
      stagger::http::ParseQueryString(raw, allowed);
  if (q.ok()) {
    CheckAccepted(*q, allowed);
  } else {
    CheckRefusal(q.status());
  }
  return 0;
}
