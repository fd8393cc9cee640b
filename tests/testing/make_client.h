// MakeClient: a client::CoordinatorClient for tests, connected.
//   MakeClient(options, wait)  creates the client from `options` (a
//                              creation error is a test failure, and
//                              nullptr), then waits up to `wait` for its
//                              coordinator: not reaching it is a test
//                              failure, but the client is returned, so the
//                              test goes on (deciding locally) and reports
//                              everything that fails.
//   MakeClient(target, deadline, recheck)
//                              the same on `target` with only the call
//                              deadline and the recheck interval set.
#ifndef STAGGER_TESTS_TESTING_MAKE_CLIENT_H_
#define STAGGER_TESTS_TESTING_MAKE_CLIENT_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "gtest/gtest.h"

namespace stagger::testing {

inline std::unique_ptr<client::CoordinatorClient> MakeClient(
    client::ClientOptions options, absl::Duration wait = absl::Seconds(30)) {
  absl::StatusOr<std::unique_ptr<client::CoordinatorClient>> c =
      client::CoordinatorClient::Create(std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE((*c)->WaitForCoordinator(wait));
  return *std::move(c);
}

inline std::unique_ptr<client::CoordinatorClient> MakeClient(
    const std::string& target, absl::Duration deadline,
    absl::Duration recheck) {
  client::ClientOptions o;
  o.target = target;
  o.call_deadline = deadline;
  o.recheck_interval = recheck;
  return MakeClient(std::move(o));
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_MAKE_CLIENT_H_
