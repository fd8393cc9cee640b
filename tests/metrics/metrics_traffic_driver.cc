// metrics_traffic_driver: drives a known traffic pattern into a running
// staggerd through the client library (CoordinatorClient) and prints, as one
// JSON line on stdout, every decision the coordinator answered, so the live
// metrics tests can check that /metrics (and Prometheus) counted exactly
// those. Used by live_scrape_test.py and prometheus_test.py; not a tool.
//
// Per round (--rounds, default 1), with staggerd's embedded defaults:
//   --deliveries deliveries over 5 endpoints: Admit 1, Report 1 failure
//     (-> PROCEED BACKOFF, a retry delay for attempt 2), Admit 2, Report 2
//     success (-> DONE);
//   one delivery failing three times (retry delays for attempts 2, 3, 4);
//   a rate-limited endpoint: two 429s with Retry-After 2 s and 1 h (the
//     second above the default retry_after_max of 30 s: clamped), then an
//     Admit of the retry (-> DEFER RETRY_AFTER_WINDOW);
//   a NOT_RETRYABLE report (-> GIVE_UP);
//   an AdmitBatch and a ReportBatch of 5 items each; GetEndpoint and
//     ListEndpoints once each (through the generated stub: the client
//     library has no inspection calls).
// Every call has a generous deadline (--call_deadline, default 10 s) so a
// slow machine does not fall back; a decision that is not the
// coordinator's (local fallback) or an RPC error is fatal: exit status 2.
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "tests/testing/requests.h"
#include "grpcpp/grpcpp.h"
#include "core/engine/decision.h"
#include "stagger/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "staggerd gRPC address");
ABSL_FLAG(int, rounds, 1, "how many times to run the pattern");
ABSL_FLAG(int, deliveries, 20, "backoff deliveries per round");
ABSL_FLAG(absl::Duration, call_deadline, absl::Seconds(10),
          "deadline of every call (generous: no fallback on a slow box)");
ABSL_FLAG(std::string, key_prefix, "https://hooks.example",
          "endpoint key prefix (tests check it never shows in /metrics)");

namespace {

using stagger::testing::AdmitOf;
using stagger::testing::ReportOf;
using stagger::client::ClientDecision;
using stagger::client::CoordinatorClient;
using stagger::client::DecisionSource;
using stagger::engine::Outcome;
using stagger::engine::Reason;
using stagger::engine::Verdict;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "metrics_traffic_driver: %s\n", what.c_str());
  std::exit(2);
}

class Tally {
 public:
  // Counts one coordinator decision for call "admit" / "report".
  void Decision(const char* call, const ClientDecision& d) {
    if (d.source != DecisionSource::kCoordinator) {
      Fail(absl::StrCat("a ", call, " was decided locally (",
                        d.fallback_cause.ToString(), "): counts would differ"));
    }
    ++decisions_[absl::StrCat(call, "/", stagger::engine::VerdictName(d.verdict),
                              "/", stagger::engine::ReasonName(d.reason))];
    if (std::string(call) == "report" && d.verdict == Verdict::kProceed &&
        (d.reason == Reason::kBackoff || d.reason == Reason::kRetryAfter)) {
      ++retry_delays_[std::to_string(d.attempt)];
      retry_delay_sum_ += absl::ToDoubleSeconds(d.delay);
    }
    if (d.reason == Reason::kBudgetExhausted) ++budget_refusals_;
  }
  void Rpc(const char* method) { ++rpcs_[method]; }
  void Endpoint(const std::string& key) { endpoints_.insert(key); }
  void Batch(const char* method, int items) {
    ++batches_[method];
    batch_items_[method] += items;
  }
  void RetryAfterSent(absl::Duration ra) {
    ++retry_after_;
    if (ra > absl::Seconds(30)) ++retry_after_over_30s_;
  }

  std::string Json() const {
    return absl::StrCat(
        "{\"decisions\":", Map(decisions_),
        ",\"retry_delays\":", Map(retry_delays_),
        ",\"retry_delay_sum\":", absl::StrFormat("%.9f", retry_delay_sum_),
        ",\"retry_after\":", retry_after_,
        ",\"retry_after_over_30s\":", retry_after_over_30s_,
        ",\"budget_refusals\":", budget_refusals_,
        ",\"rpcs\":", Map(rpcs_),
        ",\"batches\":", Map(batches_),
        ",\"batch_items\":", Map(batch_items_),
        ",\"endpoints\":", endpoints_.size(), "}");
  }

 private:
  static std::string Map(const std::map<std::string, int>& m) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : m) parts.push_back(absl::StrCat("\"", k, "\":", v));
    return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
  }

  std::map<std::string, int> decisions_, retry_delays_, rpcs_, batches_,
      batch_items_;
  std::set<std::string> endpoints_;  // distinct keys used
  double retry_delay_sum_ = 0;
  int retry_after_ = 0, retry_after_over_30s_ = 0, budget_refusals_ = 0;
};

ClientDecision Must(absl::StatusOr<ClientDecision> d, const char* what) {
  if (!d.ok()) Fail(absl::StrCat(what, ": ", d.status().ToString()));
  return *std::move(d);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  const absl::Duration deadline = absl::GetFlag(FLAGS_call_deadline);
  const std::string prefix = absl::GetFlag(FLAGS_key_prefix);

  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  stagger::client::ClientOptions options;
  options.channel = channel;
  options.call_deadline = deadline;
  options.fallback = stagger::client::FallbackMode::kFailClosed;
  auto created = CoordinatorClient::Create(options);
  if (!created.ok()) Fail(created.status().ToString());
  std::unique_ptr<CoordinatorClient> client = *std::move(created);
  if (!client->WaitForCoordinator(absl::Seconds(30))) {
    Fail(absl::StrCat("no coordinator at ", target, " within 30 s"));
  }
  auto stub = stagger::v1::RetryCoordinator::NewStub(channel);

  Tally tally;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    // Backoff deliveries: failure, retry, success.
    for (int i = 0; i < absl::GetFlag(FLAGS_deliveries); ++i) {
      const std::string ep = absl::StrCat(prefix, "/e", i % 5);
      tally.Endpoint(ep);
      tally.Rpc("Admit");
      tally.Decision("admit", Must(client->Admit(AdmitOf(ep, 1)), "Admit 1"));
      tally.Rpc("Report");
      const ClientDecision retry = Must(
          client->Report(ReportOf(ep, 1, Outcome::kRetryableFailure)), "Report 1");
      tally.Decision("report", retry);
      if (retry.verdict != Verdict::kProceed) continue;
      tally.Rpc("Admit");
      const ClientDecision admitted = Must(client->Admit(AdmitOf(ep, 2)), "Admit 2");
      tally.Decision("admit", admitted);
      if (admitted.verdict != Verdict::kProceed) continue;
      tally.Rpc("Report");
      tally.Decision("report",
                     Must(client->Report(ReportOf(ep, 2, Outcome::kSuccess)), "Report 2"));
    }

    // One delivery that fails three times before succeeding: retry delays
    // for attempts 2, 3 and 4 (the histogram's attempt label).
    const std::string deep = absl::StrCat(prefix, "/deep");
    tally.Endpoint(deep);
    tally.Rpc("Admit");
    tally.Decision("admit", Must(client->Admit(AdmitOf(deep, 1)), "Admit deep"));
    for (int attempt = 1; attempt <= 4; ++attempt) {
      const Outcome o =
          attempt < 4 ? Outcome::kRetryableFailure : Outcome::kSuccess;
      tally.Rpc("Report");
      const ClientDecision d =
          Must(client->Report(ReportOf(deep, attempt, o)), "Report deep");
      tally.Decision("report", d);
      if (attempt == 4 || d.verdict != Verdict::kProceed) break;
      tally.Rpc("Admit");
      const ClientDecision a = Must(client->Admit(AdmitOf(deep, attempt + 1)), "Admit deep");
      tally.Decision("admit", a);
      if (a.verdict != Verdict::kProceed) break;
    }

    // Rate-limited: Retry-After honoured, the second one clamped.
    const std::string limited = absl::StrCat(prefix, "/limited");
    tally.Endpoint(limited);
    for (absl::Duration ra : {absl::Seconds(2), absl::Hours(1)}) {
      tally.Rpc("Admit");
      tally.Decision("admit", Must(client->Admit(AdmitOf(limited, 1)), "Admit limited"));
      tally.Rpc("Report");
      tally.RetryAfterSent(ra);
      tally.Decision("report", Must(client->Report(ReportOf(limited, 1,
                                                   Outcome::kRateLimited, ra)),
                                    "Report limited"));
    }
    tally.Rpc("Admit");
    tally.Decision("admit", Must(client->Admit(AdmitOf(limited, 2)), "Admit limited 2"));

    // Not retryable.
    const std::string strict = absl::StrCat(prefix, "/strict");
    tally.Endpoint(strict);
    tally.Rpc("Admit");
    tally.Decision("admit", Must(client->Admit(AdmitOf(strict, 1)), "Admit strict"));
    tally.Rpc("Report");
    tally.Decision("report", Must(client->Report(ReportOf(strict, 1,
                                                 Outcome::kNotRetryable)),
                                  "Report strict"));

    // Batches of 5.
    std::vector<std::string> keys;
    for (int j = 0; j < 5; ++j) {
      keys.push_back(absl::StrCat(prefix, "/b", j));
      tally.Endpoint(keys.back());
    }
    std::vector<stagger::engine::AdmitInput> admits(keys.size());
    std::vector<stagger::engine::ReportInput> reports(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) {
      admits[j].endpoint = keys[j];
      reports[j].endpoint = keys[j];
      reports[j].outcome = Outcome::kSuccess;
    }
    tally.Rpc("AdmitBatch");
    tally.Batch("AdmitBatch", static_cast<int>(admits.size()));
    auto ab = client->AdmitBatch(admits);
    if (!ab.ok()) Fail(absl::StrCat("AdmitBatch: ", ab.status().ToString()));
    for (const auto& d : *ab) tally.Decision("admit", d);
    tally.Rpc("ReportBatch");
    tally.Batch("ReportBatch", static_cast<int>(reports.size()));
    auto rb = client->ReportBatch(reports);
    if (!rb.ok()) Fail(absl::StrCat("ReportBatch: ", rb.status().ToString()));
    for (const auto& d : *rb) tally.Decision("report", d);

    // Inspection, straight through the stub.
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(deadline));
      stagger::v1::GetEndpointRequest req;
      req.set_endpoint(absl::StrCat(prefix, "/e0"));
      stagger::v1::GetEndpointResponse resp;
      tally.Rpc("GetEndpoint");
      grpc::Status s = stub->GetEndpoint(&ctx, req, &resp);
      if (!s.ok()) Fail(absl::StrCat("GetEndpoint: ", s.error_message()));
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(deadline));
      stagger::v1::ListEndpointsRequest req;
      req.set_page_size(10);
      stagger::v1::ListEndpointsResponse resp;
      tally.Rpc("ListEndpoints");
      grpc::Status s = stub->ListEndpoints(&ctx, req, &resp);
      if (!s.ok()) Fail(absl::StrCat("ListEndpoints: ", s.error_message()));
    }
  }
  std::printf("%s\n", tally.Json().c_str());
  return 0;
}
