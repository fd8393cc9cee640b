// stagger-http-worker: the C++ worker of the HTTP end-to-end run
// (tests/e2e/http/scenario.py; docs/EXAMPLE.md). It delivers real HTTP POSTs
// to --url through the client library, against --target (a stagger-agent's
// socket, unix:/path):
//   * the endpoint key is EndpointKeyFromUrl(--url, 1): scheme, host, port
//     and the first path segment, never the token after it;
//   * the --warmup_ids one after another, then the --ids all at once, one
//     thread each, every delivery with its own RetryLoop (the loop is
//     cheap) over one shared CoordinatorClient, deadline --deadline_s from
//     its start;
//   * an attempt is one POST with the body {"id", "attempt", "worker"}
//     (HTTP/1.1, Connection: close, each send and receive bounded by
//     --attempt_timeout_s; no answer in time is TIMEOUT), its status mapped
//     by OutcomeFromHttpStatus and its Retry-After by ParseRetryAfter; a
//     connection that fails is status 0 (RETRYABLE_FAILURE);
//   * DEFERs are parked inside RetryLoop (park_limit is infinite); a run
//     that still ends DEFERRED is parked for defer_for (a queue's
//     redelivery delay, here a sleep) and resumed from next_attempt.
// It writes --out (JSON; what the test reads):
//   {"worker": NAME, "endpoint_key": KEY, "deliveries": [{"id", "end"
//    (SUCCEEDED | GAVE_UP | ERROR), "reason" (GAVE_UP: the reason) or null,
//    "error", "attempts", "events": [{"call" (admit | report), "attempt",
//    "asked", "answered" (Unix seconds), "wait" (s), "verdict", "reason",
//    "source", "delay", "defer_for" (s), "outcome" and "retry_after"
//    (report)}]}]}
// Exit 0 once --out is written; 2 for bad flags. Only http:// URLs (the
// receiver is on loopback; no TLS here).

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/http_outcome.h"
#include "client/key_from_url.h"
#include "client/retry_loop.h"
#include "client/wait.h"
#include "core/cli/usage.h"
#include "examples/cpp/http_post.h"

ABSL_FLAG(std::string, target, "", "the stagger-agent (unix:/path)");
ABSL_FLAG(std::string, url, "", "the receiver: http://host:port/path");
ABSL_FLAG(std::string, name, "cpp", "this worker's name in request bodies");
ABSL_FLAG(std::vector<std::string>, warmup_ids, {},
          "deliveries made one after another first");
ABSL_FLAG(std::vector<std::string>, ids, {},
          "then these, all at once (a thread each)");
ABSL_FLAG(double, deadline_s, 300,
          "each delivery's deadline, seconds from its start");
ABSL_FLAG(double, attempt_timeout_s, 60,
          "bound on each send and receive of one attempt, seconds");
ABSL_FLAG(double, call_deadline_s, 5,
          "deadline of each call to the agent, seconds (a loaded machine)");
ABSL_FLAG(std::string, out, "", "where the JSON result goes");

namespace {

using stagger::client::AttemptResult;
using stagger::client::ClientDecision;
using stagger::client::Coordinator;
using stagger::client::LoopEnd;
using stagger::client::LoopResult;
using stagger::engine::Outcome;
using stagger::examples::HttpResponse;
using stagger::examples::HttpUrl;
using stagger::examples::JsonString;
using stagger::examples::ParseHttpUrl;

double UnixSeconds(absl::Time t) { return absl::ToUnixMicros(t) / 1e6; }

// ---------------------------------------------------------------------------
// What the coordinator was asked and answered, per delivery.

struct Event {
  Event(std::string call, int attempt)
      : call(std::move(call)), attempt(attempt), asked(absl::Now()) {}
  std::string call;
  int attempt;
  absl::Time asked, answered;
  absl::Duration wait;
  std::optional<Outcome> outcome;
  std::optional<absl::Duration> retry_after;
  absl::StatusOr<ClientDecision> decision;
};

std::string EventJson(const Event& e) {
  std::string s = absl::StrFormat(
      "{\"call\": \"%s\", \"attempt\": %d, \"asked\": %.6f, \"answered\": "
      "%.6f, \"wait\": %.6f",
      e.call, e.attempt, UnixSeconds(e.asked), UnixSeconds(e.answered),
      absl::ToDoubleSeconds(e.wait));
  if (e.outcome) {
    absl::StrAppend(&s, ", \"outcome\": \"",
                    stagger::engine::OutcomeName(*e.outcome), "\"");
  }
  if (e.retry_after) {
    absl::StrAppend(
        &s, ", \"retry_after\": ", absl::ToDoubleSeconds(*e.retry_after));
  }
  if (!e.decision.ok()) {
    return absl::StrCat(
        s, ", \"error\": ", JsonString(e.decision.status().ToString()), "}");
  }
  const ClientDecision& d = *e.decision;
  return absl::StrCat(
      s, absl::StrFormat(", \"verdict\": \"%s\", \"reason\": \"%s\", "
                         "\"source\": \"%s\", \"delay\": %.6f, \"defer_for\": "
                         "%.6f}",
                         stagger::engine::VerdictName(d.verdict),
                         stagger::engine::ReasonName(d.reason),
                         stagger::client::DecisionSourceName(d.source),
                         absl::ToDoubleSeconds(d.delay),
                         absl::ToDoubleSeconds(d.defer_for)));
}

// A Coordinator that passes every call to `inner` and keeps an Event of it.
// One per delivery (its RetryLoop's calls come one at a time).
class RecordingCoordinator final : public Coordinator {
 public:
  explicit RecordingCoordinator(Coordinator* inner) : inner_(inner) {}

  absl::StatusOr<ClientDecision> Admit(
      const stagger::client::AdmitRequest& in) override {
    Event e("admit", in.attempt);
    e.wait = in.wait;
    e.decision = inner_->Admit(in);
    e.answered = absl::Now();
    events_.push_back(e);
    return e.decision;
  }
  absl::StatusOr<ClientDecision> Report(
      const stagger::client::ReportRequest& in) override {
    Event e("report", in.attempt);
    e.outcome = in.outcome;
    e.retry_after = in.retry_after;
    e.decision = inner_->Report(in);
    e.answered = absl::Now();
    events_.push_back(e);
    return e.decision;
  }
  const std::vector<Event>& events() const { return events_; }

 private:
  Coordinator* inner_;
  std::vector<Event> events_;
};

// ---------------------------------------------------------------------------
// One delivery, to its end.

struct Delivery {
  explicit Delivery(std::string id) : id(std::move(id)) {}
  std::string id;
  std::string end = "ERROR";
  std::string reason;  // GAVE_UP only
  std::string error;   // ERROR only
  int attempts = 0;
  std::vector<Event> events;
};

void Deliver(Coordinator* client, const std::string& key, const HttpUrl& url,
             const std::string& name, Delivery* d) {
  RecordingCoordinator recorder(client);
  const stagger::client::Canceller never;
  stagger::client::RetryLoopOptions options;
  options.deadline =
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_deadline_s));
  options.attempt_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_attempt_timeout_s));
  const stagger::client::RetryLoop loop(&recorder, &never, options);
  auto attempt = [&](const stagger::client::Attempt& a) {
    const HttpResponse r =
        stagger::examples::Post(
            url,
            absl::StrCat("{\"id\": ", JsonString(d->id), ", \"attempt\": ",
                         a.number, ", \"worker\": ", JsonString(name), "}"),
            a.timeout, "application/json");
    AttemptResult result;
    result.outcome = r.timed_out
                         ? Outcome::kTimeout
                         : stagger::client::OutcomeFromHttpStatus(r.status);
    if (!r.retry_after.empty()) {
      result.retry_after =
          stagger::client::ParseRetryAfter(r.retry_after, absl::Now());
    }
    return result;
  };
  int next_attempt = 1;
  absl::Time first_attempt_time = absl::InfinitePast();
  for (;;) {
    const LoopResult r =
        loop.Resume(key, next_attempt, first_attempt_time, attempt);
    d->attempts += r.attempts_made;
    if (r.end == LoopEnd::kDeferred) {  // parked: back after defer_for
      next_attempt = r.next_attempt;
      first_attempt_time = r.first_attempt_time;
      absl::SleepFor(r.last_decision->defer_for);
      continue;
    }
    d->end = stagger::client::LoopEndName(r.end);
    if (r.end == LoopEnd::kGaveUp) {
      d->reason = stagger::engine::ReasonName(r.last_decision->reason);
    }
    if (r.end == LoopEnd::kError) d->error = r.error.ToString();
    break;
  }
  d->events = recorder.events();
}

std::string DeliveryJson(const Delivery& d) {
  std::vector<std::string> events;
  for (const Event& e : d.events) events.push_back(EventJson(e));
  return absl::StrCat(
      "{\"id\": ", JsonString(d.id), ", \"end\": ", JsonString(d.end),
      ", \"reason\": ", d.reason.empty() ? "null" : JsonString(d.reason),
      ", \"error\": ", d.error.empty() ? "null" : JsonString(d.error),
      ", \"attempts\": ", d.attempts, ", \"events\": [",
      absl::StrJoin(events, ", "), "]}");
}

// Writes --out: the worker, its key and every delivery of `sets`, in order.
// False if the file could not be written.
bool WriteOut(const std::string& out, const std::string& name,
              const std::string& key,
              std::initializer_list<const std::vector<Delivery>*> sets) {
  std::vector<std::string> all;
  for (const std::vector<Delivery>* set : sets) {
    for (const Delivery& d : *set) all.push_back(DeliveryJson(d));
  }
  std::ofstream f(out);
  f << "{\"worker\": " << JsonString(name) << ", \"endpoint_key\": " << JsonString(key)
    << ", \"deliveries\": [" << absl::StrJoin(all, ",\n") << "]}\n";
  f.close();
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists this program's flags (examples/cpp/).
  stagger::cli::InstallUsage(
      "Delivers HTTP POSTs to --url through the stagger-agent at --target; "
      "writes what happened to --out (JSON).",
      "examples/cpp");
  absl::ParseCommandLine(argc, argv);
  const std::string name = absl::GetFlag(FLAGS_name);
  const std::string out = absl::GetFlag(FLAGS_out);
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(absl::GetFlag(FLAGS_url));
  absl::StatusOr<std::string> key =
      stagger::client::EndpointKeyFromUrl(absl::GetFlag(FLAGS_url), 1);
  if (!url.ok() || !key.ok() || out.empty() ||
      absl::GetFlag(FLAGS_target).empty()) {
    std::fprintf(stderr,
                 "%s: --target, --url (http://host:port/path) and "
                 "--out are required: %s %s\n",
                 name.c_str(), url.status().ToString().c_str(),
                 key.status().ToString().c_str());
    return 2;
  }
  stagger::client::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.call_deadline = absl::Seconds(absl::GetFlag(FLAGS_call_deadline_s));
  auto client = stagger::client::CoordinatorClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 client.status().ToString().c_str());
    return 2;
  }

  std::vector<Delivery> warmups, deliveries;
  for (const std::string& id : absl::GetFlag(FLAGS_warmup_ids)) {
    warmups.emplace_back(id);
  }
  for (const std::string& id : absl::GetFlag(FLAGS_ids)) {
    deliveries.emplace_back(id);
  }
  for (Delivery& d : warmups) Deliver(client->get(), *key, *url, name, &d);
  std::fprintf(stderr, "%s: %zu warm-up deliveries done; %zu at once\n",
               name.c_str(), warmups.size(), deliveries.size());
  std::vector<std::thread> threads;
  for (Delivery& d : deliveries) {
    threads.emplace_back(Deliver, client->get(), *key, *url, name, &d);
  }
  for (std::thread& t : threads) t.join();

  if (!WriteOut(out, name, *key, {&warmups, &deliveries})) {
    std::fprintf(stderr, "%s: cannot write %s\n", name.c_str(), out.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s: done\n", name.c_str());
  return 0;
}
