// agent_worker: a C++ worker for tests/agent: delivers --deliveries
// deliveries, round-robin over --endpoints endpoints, through the client
// library's RetryLoop against --target (a stagger-agent's socket), every
// attempt succeeding, and prints one JSON line:
//   {"succeeded": N, "ended_otherwise": M, "errors": E}
// Exit 0 if every delivery succeeded.
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/retry_loop.h"
#include "client/wait.h"

ABSL_FLAG(std::string, target, "", "the agent (unix:/path) or coordinator");
ABSL_FLAG(std::string, endpoint_prefix, "https://cpp-worker.example/",
          "endpoint keys are this plus a number");
ABSL_FLAG(int, endpoints, 10, "endpoints to deliver to");
ABSL_FLAG(int, deliveries, 100, "deliveries to make");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  stagger::client::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.call_deadline = absl::Seconds(5);  // a loaded CI machine
  auto client = stagger::client::CoordinatorClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "agent_worker: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  stagger::client::Canceller never;
  stagger::client::RetryLoop loop(client->get(), &never);
  int succeeded = 0, other = 0, errors = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_deliveries); ++i) {
    const std::string ep = absl::StrCat(absl::GetFlag(FLAGS_endpoint_prefix),
                                        i % absl::GetFlag(FLAGS_endpoints));
    stagger::client::LoopResult r = loop.Run(ep, [](const stagger::client::Attempt&) {
      return stagger::client::AttemptResult{stagger::engine::Outcome::kSuccess,
                                            std::nullopt};
    });
    if (r.end == stagger::client::LoopEnd::kSucceeded) {
      ++succeeded;
    } else if (r.end == stagger::client::LoopEnd::kError) {
      ++errors;
    } else {
      ++other;
    }
  }
  std::printf("{\"succeeded\": %d, \"ended_otherwise\": %d, \"errors\": %d}\n",
              succeeded, other, errors);
  return other == 0 && errors == 0 ? 0 : 1;
}
