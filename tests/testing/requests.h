// Short builders for the client's named request structs, for tests that
// make many calls with only a key, an attempt and an outcome. (The library
// itself takes the structs; callers with times set the fields by name.)
#ifndef STAGGER_TESTS_TESTING_REQUESTS_H_
#define STAGGER_TESTS_TESTING_REQUESTS_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"

namespace stagger::testing {

inline client::AdmitRequest AdmitOf(absl::string_view endpoint, int attempt) {
  client::AdmitRequest in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  return in;
}

inline client::ReportRequest ReportOf(
    absl::string_view endpoint, int attempt, engine::Outcome outcome,
    std::optional<absl::Duration> retry_after = std::nullopt) {
  client::ReportRequest in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  in.outcome = outcome;
  in.retry_after = retry_after;
  return in;
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_REQUESTS_H_
