// HTTP -> Stagger vocabulary: the outcome to report for an HTTP status, and
// the Retry-After header as a duration.
//
// OutcomeFromHttpStatus (the table of proto/stagger/v1/coordinator.proto,
// plus the cases it leaves open):
//   200..299          SUCCESS
//   408               TIMEOUT            (the server timed the request out)
//   429, 503          RATE_LIMITED       (usually with Retry-After)
//   other 500..599    RETRYABLE_FAILURE
//   other 400..499    NOT_RETRYABLE      (retrying the same request cannot help)
//   300..399          NOT_RETRYABLE      a redirect the worker did not follow
//                                        will be answered the same way again;
//                                        following redirects is the HTTP
//                                        client's job, not the retry loop's
//   100..199          RETRYABLE_FAILURE  an interim response as the final one
//                                        means the exchange broke off
//   anything else     RETRYABLE_FAILURE  (0 and negative are what many HTTP
//                                        clients use for "no response": a
//                                        connect error or reset; >= 600 is a
//                                        broken peer) -- a transport failure
//
// ParseRetryAfter accepts both forms of RFC 9110 section 10.2.3:
//   delta-seconds  "120"                            (1*DIGIT)
//   HTTP-date      "Sun, 06 Nov 1994 08:49:37 GMT"  (IMF-fixdate), and the
//                  obsolete forms recipients must accept:
//                  "Sunday, 06-Nov-94 08:49:37 GMT" (RFC 850) and
//                  "Sun Nov  6 08:49:37 1994"       (asctime)
// Surrounding spaces/tabs are ignored. Results are clamped to
// [0, engine::kMaxRetryAfter] (1 day, the most the coordinator accepts): a
// date in the past, or "-5", gives zero; "999999999999" gives one day.
// Anything else (empty, "1.5", "soon", a date with a bad month or a zone
// other than GMT) gives nullopt: report no Retry-After.
//
// ParseRateLimitReset reads the RateLimit-Reset header of
// draft-ietf-httpapi-ratelimit-headers-06 (section 5.3): the seconds until
// the limiter's quota resets, an RFC 8941 Integer ("30"; at most 15
// digits, not negative), optionally followed by parameters (";w=60"),
// which are ignored. Surrounding spaces/tabs are ignored; the result is
// clamped to [0, engine::kMaxRetryAfter] (a server that sends a Unix time
// instead, as some did before the draft, reads as a long wait, which the
// coordinator clamps to the policy's retry_after_max). Anything else
// (empty, "-1", "1.5", "soon", an HTTP-date, 16 digits or more) gives
// nullopt: report no RateLimit-Reset. Report what it gives with the
// attempt's outcome (AttemptResult::ratelimit_reset); the coordinator reads
// it with RATE_LIMITED.
//
//   sc::AttemptResult r{sc::OutcomeFromHttpStatus(status),
//                       sc::ParseRetryAfter(retry_after, absl::Now()),
//                       sc::ParseRateLimitReset(ratelimit_reset)};
//
// Pure functions; thread-safe.
#ifndef STAGGER_CLIENT_HTTP_OUTCOME_H_
#define STAGGER_CLIENT_HTTP_OUTCOME_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"

namespace stagger::client {

engine::Outcome OutcomeFromHttpStatus(int status);

// `now` is the worker's receipt time of the response (HTTP-dates are
// converted relative to it).
std::optional<absl::Duration> ParseRetryAfter(absl::string_view header,
                                              absl::Time now);

std::optional<absl::Duration> ParseRateLimitReset(absl::string_view header);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_HTTP_OUTCOME_H_
