// AdmitOk / ReportOk: one Engine::Admit or Engine::Report, for tests whose
// input is valid. The input is filled from the arguments (the defaults are
// AdmitInput's and ReportInput's: no deadline, first attempt unknown); a
// non-OK status is a test failure (EXPECT, naming the status) and gives a
// default Decision, so the test goes on and reports every failure.
#ifndef STAGGER_TESTS_TESTING_ENGINE_CALLS_H_
#define STAGGER_TESTS_TESTING_ENGINE_CALLS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "gtest/gtest.h"

namespace stagger::testing {

inline engine::Decision AdmitOk(engine::Engine& e, absl::string_view endpoint,
                                int attempt,
                                absl::Time deadline = absl::InfiniteFuture(),
                                absl::Time first = absl::InfinitePast()) {
  engine::AdmitInput in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  in.deadline = deadline;
  in.first_attempt_time = first;
  absl::StatusOr<engine::Decision> d = e.Admit(in);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : engine::Decision{};
}

inline engine::Decision ReportOk(
    engine::Engine& e, absl::string_view endpoint, int attempt,
    engine::Outcome outcome,
    std::optional<absl::Duration> retry_after = std::nullopt,
    absl::Time deadline = absl::InfiniteFuture(),
    absl::Time first = absl::InfinitePast()) {
  engine::ReportInput in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  in.outcome = outcome;
  in.retry_after = retry_after;
  in.deadline = deadline;
  in.first_attempt_time = first;
  absl::StatusOr<engine::Decision> d = e.Report(in);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : engine::Decision{};
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_ENGINE_CALLS_H_
