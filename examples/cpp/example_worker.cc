// stagger-example-worker: a small fleet of delivery workers, in one process,
// delivering to a simulated flaky webhook endpoint through a Stagger
// coordinator. It prints every decision it is told and a summary, so that a
// person running it against staggerd sees:
//   * retries spread out (decorrelated-jitter BACKOFF delays, all different);
//   * the breaker opening during the outage (DEFER CIRCUIT_OPEN, deferral
//     times spread), half-opening (HALF_OPEN_PROBE) and closing;
//   * a Retry-After sent to one worker honoured by all of them (RETRY_AFTER
//     delays and RETRY_AFTER_WINDOW deferrals on other workers).
//
//   staggerd --address 127.0.0.1:50051 &
//   stagger-example-worker --coordinator 127.0.0.1:50051
//
// The simulated endpoint, by time since start (flags in brackets):
//   [0, outage_seconds)                  every request: HTTP 500
//   [rate_limit_at, + rate_limit_seconds) every other request: HTTP 429 with
//                                        "Retry-After: retry_after_seconds"
//   otherwise                            HTTP 200, with 3% HTTP 500
// Deliveries arrive evenly over --arrival_seconds (defaults: 200 over 12 s,
// 32 workers). A worker holds its delivery through a PROCEED delay
// (RetryLoop asks a waiting Admit for it, which staggerd answers early
// with RELEASED once the endpoint is seen to recover: against staggerd the
// last delivery goes when the last Retry-After window ends, about 13 s
// into the run with the defaults). A deferred delivery waits in its loop,
// held by the coordinator (or sleeping when the fallback decides), until
// it is let go (docs/CLIENT_CONTRACT.md). With a park limit set, a run that
// ends deferred is parked in the worker queue until its defer time (the
// way a queue consumer would set a redelivery delay) and the worker takes
// the next one. The run stops when
// every delivery has ended, or after --max_run_seconds (then the rest is
// reported as parked; Cancel() interrupts every wait at once).
//
// This file is documentation: read it top to bottom as "how to use the
// client library" (CoordinatorClient, RetryLoop, OutcomeFromHttpStatus,
// ParseRetryAfter, Canceller).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/http_outcome.h"
#include "client/key_from_url.h"
#include "client/retry_loop.h"
#include "client/tls_options.h"
#include "client/wait.h"
#include "core/cli/usage.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "stagger/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:50051",
          "staggerd: host:port, a replica list host:port,host:port (or "
          "name=host:port,...), or dns:///headless-service:port");
ABSL_FLAG(int, workers, 32, "worker threads (1..256)");
ABSL_FLAG(int, deliveries, 200, "deliveries to make (1..100000)");
ABSL_FLAG(std::string, endpoint, "https://hooks.example.com/orders",
          "the URL the deliveries go to; the endpoint key sent to staggerd "
          "is derived from it (EndpointKeyFromUrl: never userinfo, query or "
          "fragment)");
ABSL_FLAG(int, key_path_segments, 1,
          "path segments of the URL kept in the endpoint key (0..16)");
ABSL_FLAG(std::string, tls_ca_file, "",
          "TLS: the CA that signed staggerd's certificate");
ABSL_FLAG(std::string, tls_cert_file, "",
          "mutual TLS: this worker's certificate (with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "mutual TLS: this worker's key");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name in staggerd's certificate, if not the --coordinator host");
ABSL_FLAG(double, arrival_seconds, 12, "deliveries arrive evenly over this");
ABSL_FLAG(double, outage_seconds, 4, "the endpoint fails everything first");
ABSL_FLAG(double, rate_limit_at, 9, "when the 429 burst starts (seconds)");
ABSL_FLAG(double, rate_limit_seconds, 2, "how long the 429 burst lasts");
ABSL_FLAG(int, retry_after_seconds, 2, "Retry-After sent with each 429");
ABSL_FLAG(double, max_run_seconds, 40, "hard bound on the run time");
ABSL_FLAG(double, delivery_deadline_seconds, 30,
          "each delivery's own deadline, from its arrival");
ABSL_FLAG(int, deadline_ms, 50, "per-call coordinator deadline");
ABSL_FLAG(bool, fail_closed, false,
          "defer instead of deciding locally when staggerd is unreachable");
ABSL_FLAG(bool, quiet, false, "print only the breaker changes and summary");

namespace {

using stagger::client::Call;
using stagger::client::ClientDecision;
using stagger::client::DecisionEvent;
using stagger::client::DecisionSource;
using stagger::client::LoopEnd;
using stagger::client::LoopResult;
using stagger::engine::Outcome;
using stagger::engine::Reason;
using stagger::engine::Verdict;

// The endpoint key for --endpoint (set once in main, before any worker
// runs): the delivery URL without what must not leave the worker.
std::string g_key;

// When the run starts (set once in main, before any worker runs): the
// endpoint's timeline and every printed t= are relative to it.
absl::Time g_start = absl::Now();
double Since(absl::Time t) { return absl::ToDoubleSeconds(t - g_start); }

// Prints one line at once (lines from different threads do not interleave).
void Line(const std::string& s) { std::fputs((s + "\n").c_str(), stdout); }

std::string Brief(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

// ---------------------------------------------------------------------------
// The simulated endpoint: an HTTP status and maybe a Retry-After header.

struct HttpResponse {
  int status = 200;
  std::string retry_after;  // header value, empty if none
};

class FlakyEndpoint {
 public:
  HttpResponse Post() {
    // A request takes a few milliseconds.
    absl::SleepFor(absl::Milliseconds(absl::Uniform(gen(), 2, 10)));
    const double t = Since(absl::Now());
    if (t < absl::GetFlag(FLAGS_outage_seconds)) return {500, ""};
    const double rl = absl::GetFlag(FLAGS_rate_limit_at);
    if (t >= rl && t < rl + absl::GetFlag(FLAGS_rate_limit_seconds) &&
        counter_.fetch_add(1) % 2 == 0) {
      return {429, absl::StrCat(absl::GetFlag(FLAGS_retry_after_seconds))};
    }
    if (absl::Bernoulli(gen(), 0.03)) return {500, ""};
    return {200, ""};
  }

 private:
  static absl::BitGen& gen() {
    thread_local absl::BitGen g;
    return g;
  }
  std::atomic<int> counter_{0};
};

// ---------------------------------------------------------------------------
// The worker queue: deliveries ready at some time, earliest first.

struct Delivery {
  int id = 0;
  absl::Time ready;                 // not before
  int next_attempt = 1;             // where to resume (after a deferral)
  absl::Time first_attempt_time = absl::InfinitePast();
  absl::Time deadline = absl::InfiniteFuture();
  int attempts = 0;                 // sent so far, over all runs
};

class WorkQueue {
 public:
  void Push(Delivery d) {
    absl::MutexLock l(&mu_);
    q_.push(std::move(d));
    cv_.Signal();
  }
  // Wakes every Pop(): they return nullopt from now on.
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
    cv_.SignalAll();
  }
  // Blocks until a delivery is ready, or the queue is closed.
  std::optional<Delivery> Pop() {
    absl::MutexLock l(&mu_);
    while (!closed_) {
      if (q_.empty()) {
        cv_.Wait(&mu_);
        continue;
      }
      if (q_.top().ready <= absl::Now()) {
        Delivery d = q_.top();
        q_.pop();
        return d;
      }
      cv_.WaitWithDeadline(&mu_, q_.top().ready);  // or a Push / Close
    }
    return std::nullopt;
  }
  size_t size() const {
    absl::MutexLock l(&mu_);
    return q_.size();
  }

 private:
  struct Later {
    bool operator()(const Delivery& a, const Delivery& b) const {
      return a.ready > b.ready;
    }
  };
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::priority_queue<Delivery, std::vector<Delivery>, Later> q_
      ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Deliveries not yet ended; main waits for zero (or the run-time bound).
class OpenCount {
 public:
  explicit OpenCount(int n) : n_(n) {}
  void Ended() {
    absl::MutexLock l(&mu_);
    --n_;
  }
  // True if every delivery ended before `deadline`.
  bool AwaitZero(absl::Time deadline) {
    absl::MutexLock l(&mu_);
    auto zero = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ <= 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&zero), deadline);
  }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// What the fleet was told, for the summary.

class Tally {
 public:
  void Decision(int worker, const DecisionEvent& e) {
    absl::MutexLock l(&mu_);
    const ClientDecision& d = e.decision;
    ++by_reason_[stagger::engine::ReasonName(d.reason)];
    ++by_source_[stagger::client::DecisionSourceName(d.source)];
    if (d.verdict == Verdict::kProceed && d.reason == Reason::kBackoff) {
      backoff_ms_.push_back(absl::ToDoubleMilliseconds(d.delay));
    }
    if (d.verdict == Verdict::kDefer) {
      defer_ms_.push_back(absl::ToDoubleMilliseconds(d.defer_for));
    }
    if (d.reason == Reason::kRetryAfter ||
        d.reason == Reason::kRetryAfterWindow) {
      waited_for_retry_after_.insert(worker);
      // Held by a Retry-After that another delivery received: an admit, or
      // a report of something other than this delivery's own 429.
      if (e.call == Call::kAdmit || e.outcome != Outcome::kRateLimited) {
        ++held_by_fleet_;
      }
    }
  }
  void RetryAfterSeen(int worker, absl::Duration ra) {
    absl::MutexLock l(&mu_);
    if (first_retry_after_worker_ < 0) {
      first_retry_after_worker_ = worker;
      first_retry_after_at_ = absl::Now();
      first_retry_after_ = ra;
    }
  }
  void Ended(LoopEnd end, int attempts) {
    absl::MutexLock l(&mu_);
    ++ended_[stagger::client::LoopEndName(end)];
    attempts_ += attempts;
  }
  void Print(int deliveries, size_t parked) const {
    absl::MutexLock l(&mu_);
    Line("");
    Line(absl::StrFormat("=== summary after %.1fs ===", Since(absl::Now())));
    std::vector<std::string> ends;
    for (const auto& [k, v] : ended_) ends.push_back(absl::StrCat(k, " ", v));
    Line(absl::StrFormat("deliveries: %d (%s; still parked %d)", deliveries,
                         absl::StrJoin(ends, ", "), parked));
    Line(absl::StrFormat("attempts sent: %d", attempts_));
    std::vector<std::string> reasons;
    for (const auto& [k, v] : by_reason_) {
      reasons.push_back(absl::StrCat(k, " ", v));
    }
    Line("decisions by reason: " + absl::StrJoin(reasons, ", "));
    std::vector<std::string> sources;
    for (const auto& [k, v] : by_source_) {
      sources.push_back(absl::StrCat(k, " ", v));
    }
    Line("decisions by source: " + absl::StrJoin(sources, ", "));
    Line("retry delays (BACKOFF):  " + Spread(backoff_ms_));
    Line("deferrals (DEFER):       " + Spread(defer_ms_));
    if (first_retry_after_worker_ >= 0) {
      Line(absl::StrFormat(
          "Retry-After: worker %d was sent \"Retry-After: %s\" first, at "
          "t=%.2fs; %d worker(s) were told to wait for a Retry-After, %d "
          "decision(s) held by one that another delivery received",
          first_retry_after_worker_, Brief(first_retry_after_),
          Since(first_retry_after_at_), waited_for_retry_after_.size(),
          held_by_fleet_));
    }
  }

 private:
  // "n=.. min=.. median=.. max=.. distinct=..": spread means distinct values.
  static std::string Spread(std::vector<double> v) {
    if (v.empty()) return "none";
    std::sort(v.begin(), v.end());
    const size_t distinct =
        std::unique(v.begin(), v.end()) - v.begin();  // v now partly unique
    std::vector<double> w(v.begin(), v.begin() + distinct);
    return absl::StrFormat("n=%d min=%.0fms median=%.0fms max=%.0fms "
                           "distinct values=%d",
                           v.size(), w.front(), w[w.size() / 2], w.back(),
                           distinct);
  }
  mutable absl::Mutex mu_;
  std::map<std::string, int> by_reason_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> by_source_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> ended_ ABSL_GUARDED_BY(mu_);
  std::vector<double> backoff_ms_ ABSL_GUARDED_BY(mu_);
  std::vector<double> defer_ms_ ABSL_GUARDED_BY(mu_);
  std::set<int> waited_for_retry_after_ ABSL_GUARDED_BY(mu_);
  int first_retry_after_worker_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time first_retry_after_at_ ABSL_GUARDED_BY(mu_);
  absl::Duration first_retry_after_ ABSL_GUARDED_BY(mu_);
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  int held_by_fleet_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string Describe(int worker, int delivery, const DecisionEvent& e,
                     int http_status) {
  const ClientDecision& d = e.decision;
  std::string what;
  switch (d.verdict) {
    case Verdict::kProceed:
      what = "delay=" + Brief(d.delay);
      break;
    case Verdict::kDefer:
      what = "defer=" + Brief(d.defer_for);
      break;
    default:
      break;
  }
  std::string call =
      e.call == Call::kAdmit
          ? absl::StrFormat("admit  #%d", e.attempt)
          : absl::StrFormat("report #%d %s(%d)", e.attempt,
                            stagger::engine::OutcomeName(*e.outcome),
                            http_status);
  return absl::StrFormat("t=%6.2fs w%-2d d%03d %-34s -> %-7s %-18s %-14s [%s]",
                         Since(absl::Now()), worker, delivery, call,
                         stagger::engine::VerdictName(d.verdict),
                         stagger::engine::ReasonName(d.reason), what,
                         stagger::client::DecisionSourceName(d.source));
}

// ---------------------------------------------------------------------------
// One worker thread: take a ready delivery, run its retry loop, park it if
// deferred.

void Worker(int id, stagger::client::CoordinatorClient* client,
            FlakyEndpoint* endpoint, WorkQueue* queue,
            const stagger::client::Canceller* stop, Tally* tally,
            OpenCount* open_deliveries) {
  const std::string key = g_key;
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  while (std::optional<Delivery> d = queue->Pop()) {
    int last_status = 0;
    stagger::client::RetryLoopOptions options;
    options.deadline = d->deadline;
    options.on_decision = [&](const DecisionEvent& e) {
      tally->Decision(id, e);
      if (!quiet) Line(Describe(id, d->id, e, last_status));
    };
    stagger::client::RetryLoop loop(client, stop, options);

    // The attempt: POST, map the HTTP status and Retry-After for Report.
    auto attempt = [&](const stagger::client::Attempt&) {
      const HttpResponse r = endpoint->Post();
      last_status = r.status;
      stagger::client::AttemptResult result;
      result.outcome = stagger::client::OutcomeFromHttpStatus(r.status);
      if (!r.retry_after.empty()) {
        result.retry_after =
            stagger::client::ParseRetryAfter(r.retry_after, absl::Now());
        if (result.retry_after) tally->RetryAfterSeen(id, *result.retry_after);
      }
      return result;
    };

    const LoopResult r = loop.Resume(key, d->next_attempt,
                                     d->first_attempt_time, attempt);
    d->attempts += r.attempts_made;
    switch (r.end) {
      case LoopEnd::kDeferred:
        // Park it: back in the queue at the coordinator's time. No attempt
        // was consumed; resume with the same attempt number.
        d->next_attempt = r.next_attempt;
        d->first_attempt_time = r.first_attempt_time;
        d->ready = absl::Now() + r.last_decision->defer_for;
        queue->Push(*d);
        break;
      case LoopEnd::kCancelled:
        break;  // shutting down: it stays undelivered (a real queue keeps it)
      case LoopEnd::kError:
        Line(absl::StrCat("d", d->id, ": error: ", r.error.ToString()));
        [[fallthrough]];
      default:  // kSucceeded, kGaveUp (a real worker would dead-letter it)
        tally->Ended(r.end, d->attempts);
        open_deliveries->Ended();
        break;
    }
  }
}

// Watches the endpoint's breaker through the read-only inspection RPC and
// prints its transitions.
void WatchBreaker(std::shared_ptr<grpc::Channel> channel, const std::string& key,
                  const stagger::client::Canceller* stop) {
  auto stub = stagger::v1::RetryCoordinator::NewStub(channel);
  std::string last = "CLOSED";
  while (stop->WaitFor(absl::Milliseconds(100))) {
    stagger::v1::GetEndpointRequest req;
    req.set_endpoint(key);
    stagger::v1::GetEndpointResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
    const grpc::Status s = stub->GetEndpoint(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      Line("(breaker watch off: this worker's certificate is not allowed "
           "GetEndpoint by the coordinator's policy, which is right for a "
           "worker)");
      return;
    }
    if (!s.ok()) continue;
    const std::string now =
        stagger::v1::BreakerState_Name(resp.state().breaker_state());
    if (now != last) {
      // Half-open can be shorter than one look: say so rather than hide it.
      const char* via = last == "OPEN" && now == "CLOSED"
                            ? " (via HALF_OPEN: the probes succeeded)"
                            : "";
      Line(absl::StrFormat("t=%6.2fs *** breaker %s -> %s%s",
                           Since(absl::Now()), last, now, via));
      last = now;
    }
  }
}

// 1. The endpoint key: from the delivery URL, keeping scheme, host, port
//    and the first path segment; a token in the URL never reaches the
//    coordinator, its logs or staggerctl's output. nullopt (the error
//    printed) if --endpoint cannot be keyed.
std::optional<std::string> EndpointKeyFromFlags() {
  absl::StatusOr<std::string> key = stagger::client::EndpointKeyFromUrl(
      absl::GetFlag(FLAGS_endpoint), absl::GetFlag(FLAGS_key_path_segments));
  if (!key.ok()) {
    std::fprintf(stderr, "--endpoint: %s\n", key.status().ToString().c_str());
    return std::nullopt;
  }
  return *std::move(key);
}

stagger::client::ClientTlsOptions TlsFromFlags() {
  stagger::client::ClientTlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  return tls;
}

// 2. The client: one per process, shared by every worker thread; TLS if
//    the --tls_* flags say so. It waits up to 2 s for the coordinator, then
//    goes on deciding locally until it is reachable. nullptr (the error
//    printed) on bad flags.
std::unique_ptr<stagger::client::CoordinatorClient> ClientFromFlags(
    const stagger::client::ClientTlsOptions& tls) {
  auto credentials = stagger::client::MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "bad TLS flags: %s\n",
                 credentials.status().ToString().c_str());
    return nullptr;
  }
  stagger::client::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_coordinator);
  options.credentials = *credentials;
  options.tls_server_name = tls.server_name;
  options.call_deadline = absl::Milliseconds(absl::GetFlag(FLAGS_deadline_ms));
  options.fallback = absl::GetFlag(FLAGS_fail_closed)
                         ? stagger::client::FallbackMode::kFailClosed
                         : stagger::client::FallbackMode::kFailOpen;
  auto client = stagger::client::CoordinatorClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "bad options: %s\n",
                 client.status().ToString().c_str());
    return nullptr;
  }
  if (!(*client)->WaitForCoordinator(absl::Seconds(2))) {
    Line("coordinator " + options.target +
         " not reachable: deciding locally (source=local) until it is");
  }
  return *std::move(client);
}

// What the run will do, and what to look for in its output.
void PrintPlan(int workers, int deliveries) {
  Line(absl::StrFormat(
      "%d workers, %d deliveries to %s; endpoint outage for %.0fs, 429 burst "
      "at %.0fs for %.0fs (Retry-After: %ds)",
      workers, deliveries, g_key,
      absl::GetFlag(FLAGS_outage_seconds), absl::GetFlag(FLAGS_rate_limit_at),
      absl::GetFlag(FLAGS_rate_limit_seconds),
      absl::GetFlag(FLAGS_retry_after_seconds)));
  Line("watch for: BACKOFF delays that all differ; \"*** breaker\" lines and "
       "CIRCUIT_OPEN deferrals during the outage; RETRY_AFTER / "
       "RETRY_AFTER_WINDOW on workers that were not sent the 429");
}

// 3. The deliveries arrive evenly over --arrival_seconds from g_start, each
//    with its own deadline.
void QueueDeliveries(int deliveries, WorkQueue* queue) {
  const absl::Duration arrival =
      absl::Seconds(absl::GetFlag(FLAGS_arrival_seconds));
  for (int i = 0; i < deliveries; ++i) {
    Delivery d;
    d.id = i;
    d.ready = g_start + arrival * i / deliveries;
    d.deadline =
        d.ready + absl::Seconds(absl::GetFlag(FLAGS_delivery_deadline_seconds));
    queue->Push(d);
  }
}

// 4. Workers, a breaker watcher, and a bound on the run time. `stop` wakes
//    every wait at once. Prints the summary and returns the exit status.
int RunFleet(stagger::client::CoordinatorClient* client,
             const stagger::client::ClientTlsOptions& tls, int workers,
             int deliveries, WorkQueue* queue) {
  stagger::client::Canceller stop;
  FlakyEndpoint endpoint;
  Tally tally;
  OpenCount open_deliveries(deliveries);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back(Worker, w, client, &endpoint, queue, &stop, &tally,
                         &open_deliveries);
  }
  // The breaker lives on the replica that owns the endpoint's key.
  auto watch_channel =
      stagger::client::MakeChannel(client->OwnerOf(g_key).target, tls);
  if (!watch_channel.ok()) {
    std::fprintf(stderr, "bad options: %s\n",
                 watch_channel.status().ToString().c_str());
    return 2;
  }
  std::thread watcher(WatchBreaker, *watch_channel, g_key, &stop);

  const absl::Time bound =
      g_start + absl::Seconds(absl::GetFlag(FLAGS_max_run_seconds));
  open_deliveries.AwaitZero(bound);
  stop.Cancel();   // wakes workers waiting out a delay
  queue->Close();  // wakes workers waiting for a delivery
  for (auto& t : threads) t.join();
  watcher.join();

  tally.Print(deliveries, queue->size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists this program's flags (examples/cpp/).
  stagger::cli::InstallUsage(
      "Delivers to a simulated flaky endpoint through staggerd and prints "
      "every decision.\n  stagger-example-worker --coordinator "
      "127.0.0.1:50051",
      "examples/cpp");
  absl::ParseCommandLine(argc, argv);
  const int workers = std::clamp(absl::GetFlag(FLAGS_workers), 1, 256);
  const int deliveries = std::clamp(absl::GetFlag(FLAGS_deliveries), 1, 100000);

  std::optional<std::string> key = EndpointKeyFromFlags();
  if (!key) return 2;
  g_key = *key;
  const stagger::client::ClientTlsOptions tls = TlsFromFlags();
  std::unique_ptr<stagger::client::CoordinatorClient> client =
      ClientFromFlags(tls);
  if (client == nullptr) return 2;
  PrintPlan(workers, deliveries);

  g_start = absl::Now();
  WorkQueue queue;
  QueueDeliveries(deliveries, &queue);
  return RunFleet(client.get(), tls, workers, deliveries, &queue);
}
