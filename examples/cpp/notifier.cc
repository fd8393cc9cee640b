// stagger-notifier: tells a platform's tenants what happens to their
// endpoints. It watches every replica of the coordinator (client/watch.h)
// and POSTs each event to an HTTP URL as a CloudEvent (CloudEvents 1.0,
// structured mode: Content-Type application/cloudevents+json):
//
//   {"specversion":"1.0","id":"stagger-0-1234-42","source":"stagger://stagger-0",
//    "type":"dev.stagger.endpoint.disabled","subject":"https://a.example/x",
//    "time":"2026-...Z","datacontenttype":"application/json","data":{...}}
//
// `type` is dev.stagger.endpoint.<the event kind, lower case>; `subject` the
// endpoint key (a prefix pause's: "prefix:<prefix>"); `data` the event as
// the coordinator's JSON (watch.proto's WatchEvent). `id` is unique per
// event: replica-incarnation-sequence, or for an operator's command its
// operation id, kind and target (the same from every replica, and the
// watcher delivers it once).
//
// Its own deliveries go through Stagger: one RetryLoop per event, keyed by
// the URL (client::EndpointKeyFromUrl), so a notification URL that fails
// is retried with the fleet's backoff, breaker and Retry-After, and a
// deferral waits in the notifier (events keep their order). A delivery
// given up is printed ("dead-letter") and the next event goes. The
// events of its own URL's endpoint are not notified (that would loop).
//
//   stagger-notifier --coordinator=stagger-0=10.0.0.5:50051,...
//       --url=http://hooks.platform.internal:8080/stagger [--kinds=DISABLED]
//
// Runs until SIGINT/SIGTERM (exit 0); exit 2 for bad flags.
#include <algorithm>

#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/http_outcome.h"
#include "client/key_from_url.h"
#include "client/retry_loop.h"
#include "client/tls_options.h"
#include "client/wait.h"
#include "client/watch.h"
#include "core/cli/blocked_signals.h"
#include "core/cli/usage.h"
#include "examples/cpp/http_post.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:50051",
          "the coordinator's replicas (a worker's target): watched, and "
          "asked for the notifications' own retries");
ABSL_FLAG(std::string, url, "",
          "where each CloudEvent is POSTed: http://host:port/path (required)");
ABSL_FLAG(std::string, prefix, "", "only events of keys under this prefix");
ABSL_FLAG(std::string, kinds, "",
          "only these event kinds, comma-separated (DISABLED,ENABLED,...)");
ABSL_FLAG(bool, history, false,
          "start with the history each replica holds, not at now");
ABSL_FLAG(absl::Duration, attempt_timeout, absl::Seconds(10),
          "how long one POST may take");
ABSL_FLAG(std::string, tls_ca_file, "", "TLS: CA of the coordinator");
ABSL_FLAG(std::string, tls_cert_file, "", "mutual TLS: this notifier's cert");
ABSL_FLAG(std::string, tls_key_file, "", "mutual TLS: its key");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name in the coordinator's certificate");

namespace {

namespace sc = stagger::client;
using stagger::examples::HttpUrl;
using stagger::examples::JsonString;
using stagger::examples::ParseHttpUrl;

void Line(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

// ---- CloudEvents ----------------------------------------------------------

std::string CloudEventId(const sc::WatchEvent& e) {
  if (!e.operation_id.empty()) {
    return absl::StrCat(e.operation_id, "/", sc::EventKindName(e.kind), "/",
                        e.endpoint.empty() ? e.prefix : e.endpoint);
  }
  return absl::StrCat(e.replica, "-", e.incarnation, "-", e.sequence);
}

std::string CloudEventType(const sc::WatchEvent& e) {
  return absl::StrCat("dev.stagger.endpoint.",
                      absl::AsciiStrToLower(sc::EventKindName(e.kind)));
}

std::string CloudEvent(const sc::WatchEvent& e) {
  const std::string subject =
      e.endpoint.empty() ? absl::StrCat("prefix:", e.prefix) : e.endpoint;
  return absl::StrCat(
      "{\"specversion\":\"1.0\",\"id\":", JsonString(CloudEventId(e)),
      ",\"source\":", JsonString(absl::StrCat("stagger://", e.replica)),
      ",\"type\":", JsonString(CloudEventType(e)),
      ",\"subject\":", JsonString(subject), ",\"time\":",
      JsonString(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", e.at,
                                  absl::UTCTimeZone())),
      ",\"datacontenttype\":\"application/json\",\"data\":", e.json, "}");
}

// ---- The queue and its sender ---------------------------------------------

class Sender {
 public:
  Sender(sc::CoordinatorClient* client, HttpUrl url, std::string key,
         absl::Duration timeout)
      : client_(client), url_(std::move(url)), key_(std::move(key)),
        timeout_(timeout) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Sender() {
    stop_.Cancel();
    {
      absl::MutexLock l(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  void Push(sc::WatchEvent e) {
    absl::MutexLock l(&mu_);
    queue_.push_back(std::move(e));
  }

 private:
  // One event to its end: delivered, given up, or the notifier stopping.
  void Deliver(const sc::WatchEvent& e) {
    const std::string body = CloudEvent(e);
    const sc::RetryLoop loop(client_, &stop_);
    int next = 1;
    absl::Time first = absl::InfinitePast();
    int attempts = 0;
    for (;;) {
      const sc::LoopResult r =
          loop.Resume(key_, next, first, [&](const sc::Attempt& at) -> sc::AttemptResult {
            const stagger::examples::HttpResponse a = stagger::examples::Post(
                url_, body, std::min(timeout_, at.timeout),
                "application/cloudevents+json");
            return {sc::OutcomeFromHttpStatus(a.status),
                    sc::ParseRetryAfter(a.retry_after, absl::Now())};
          });
      attempts += r.attempts_made;
      if (r.end == sc::LoopEnd::kSucceeded) {
        Line(absl::StrCat("notified ", CloudEventType(e), " id=",
                          CloudEventId(e), " attempts=", attempts));
        return;
      }
      if (r.end == sc::LoopEnd::kDeferred && r.last_decision.has_value()) {
        next = r.next_attempt;
        first = r.first_attempt_time;
        if (!sc::WaitFor(r.last_decision->defer_for, stop_)) return;
        continue;
      }
      if (r.end == sc::LoopEnd::kCancelled) return;
      Line(absl::StrCat("dead-letter ", CloudEventType(e), " id=",
                        CloudEventId(e), ": ", sc::LoopEndName(r.end),
                        r.last_decision.has_value()
                            ? absl::StrCat(" ", stagger::engine::ReasonName(
                                                    r.last_decision->reason))
                            : absl::StrCat(" ", r.error.ToString())));
      return;
    }
  }

  void Run() {
    for (;;) {
      sc::WatchEvent e;
      {
        absl::MutexLock l(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Sender* s) ABSL_SHARED_LOCKS_REQUIRED(
                                      s->mu_) {
                                   return s->done_ || !s->queue_.empty();
                                 },
                                 this),
                             absl::Seconds(1));
        if (done_) return;
        if (queue_.empty()) continue;
        e = std::move(queue_.front());
        queue_.pop_front();
      }
      Deliver(e);
    }
  }

  sc::CoordinatorClient* const client_;
  const HttpUrl url_;
  const std::string key_;
  const absl::Duration timeout_;
  sc::Canceller stop_;
  absl::Mutex mu_;
  std::deque<sc::WatchEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

sc::ClientTlsOptions TlsFromFlags() {
  sc::ClientTlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  return tls;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "stagger-notifier: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  stagger::cli::BlockHandledSignals();  // before any thread
  stagger::cli::InstallUsage(
      "POSTs every event of the coordinator's watch to a URL as a "
      "CloudEvent.\n  stagger-notifier --coordinator 127.0.0.1:50051 --url "
      "http://127.0.0.1:8080/events",
      "examples/cpp");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(absl::GetFlag(FLAGS_url));
  if (!url.ok()) return Fail(std::string(url.status().message()));
  absl::StatusOr<std::string> key =
      sc::EndpointKeyFromUrl(absl::GetFlag(FLAGS_url), 1);
  if (!key.ok()) return Fail(std::string(key.status().message()));
  const sc::ClientTlsOptions tls = TlsFromFlags();
  auto credentials = sc::MakeChannelCredentials(tls);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));

  sc::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_coordinator);
  options.credentials = *credentials;
  options.tls_server_name = tls.server_name;
  auto client = sc::CoordinatorClient::Create(options);
  if (!client.ok()) return Fail(std::string(client.status().message()));

  sc::WatchOptions wo;
  wo.target = options.target;
  wo.credentials = *credentials;
  wo.tls_server_name = tls.server_name;
  wo.prefix = absl::GetFlag(FLAGS_prefix);
  wo.replay_history = absl::GetFlag(FLAGS_history);
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipEmpty())) {
    std::optional<sc::EventKind> kind = sc::ParseEventKind(k);
    if (!kind) return Fail(absl::StrCat("--kinds: unknown kind \"", k, "\""));
    wo.kinds.push_back(*kind);
  }
  Sender sender(client->get(), *url, *key, absl::GetFlag(FLAGS_attempt_timeout));
  // Events of the notifier's own URL are not notified: telling the URL
  // that it fails would make it fail again.
  const std::string own = *key;
  auto watcher = sc::Watcher::Start(
      std::move(wo),
      [&sender, own](const sc::WatchEvent& e) {
        if (e.endpoint != own) sender.Push(e);
      },
      [](const sc::WatchNotice& n) {
        Line(absl::StrCat("watch: ", n.member, " ",
                          sc::WatchNoticeKindName(n.kind),
                          n.detail.empty() ? "" : absl::StrCat(" ", n.detail)));
      });
  if (!watcher.ok()) return Fail(std::string(watcher.status().message()));
  Line(absl::StrCat("notifying ", absl::GetFlag(FLAGS_url), " of ",
                    options.target, "'s events"));
  stagger::cli::WaitForShutdownSignal(nullptr);
  (*watcher)->Stop();
  return 0;
}
