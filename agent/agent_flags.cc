#include "agent/agent_flags.h"

#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/config/config_loader.h"
#include "core/lease/time_bounds.h"

ABSL_FLAG(std::string, listen, "unix:/run/stagger/agent.sock",
          "where workers reach the agent: unix:/path (its folder must exist) "
          "or host:port");
ABSL_FLAG(std::string, coordinator, "127.0.0.1:50051",
          "the coordinator replicas: host:port, a list (name=host:port,...) "
          "or dns:///host:port");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9465",
          "Prometheus /metrics listen address (host:port; 0.0.0.0:9465 for "
          "every interface); empty disables metrics");
ABSL_FLAG(std::string, status_address, "",
          "host:port of a read-only status page (HTML and JSON: lease "
          "streams and leases, not-clear entries, decisions); plain HTTP, bind it to loopback or a "
          "private interface; empty (the default) disables it");
ABSL_FLAG(std::string, config, "",
          "a staggerd config file the fallback decides with (keep it the "
          "coordinators'); empty: the embedded defaults");
ABSL_FLAG(std::string, agent_id, "",
          "the name the coordinators know this agent by (1..256 bytes); "
          "empty: the host name");
ABSL_FLAG(bool, leases, true,
          "answer first attempts and successes on clear endpoints here, "
          "under the coordinators' leases");
ABSL_FLAG(absl::Duration, flush_interval, stagger::lease::kDefaultFlushInterval,
          "how often counts of local answers go to the coordinators; "
          "(0, 1s]");
ABSL_FLAG(absl::Duration, call_deadline, absl::Milliseconds(50),
          "deadline of each call to a coordinator; (0, 1m]");
ABSL_FLAG(absl::Duration, recheck_interval, absl::Seconds(1),
          "how long a coordinator that failed is decided without; (0, 1h]");
ABSL_FLAG(std::string, fallback, "fail_open",
          "when no coordinator answers: fail_open (decide with the local "
          "policy) or fail_closed (defer)");
ABSL_FLAG(int, threads, 16,
          "threads that wait on coordinators for calls not answered under a "
          "lease; 1..1024");
ABSL_FLAG(int64_t, max_queued_calls, 10000,
          "calls that may wait for such a thread; beyond it a call is "
          "answered UNAVAILABLE at once; 1..1000000");
ABSL_FLAG(int64_t, max_waiting_calls, 10000,
          "waiting Admits (AdmitRequest.wait) held at once (~17 KiB each); "
          "beyond it a waiting Admit is answered at once, as an Admit "
          "without a wait; 0..1000000 (0: none held)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(5),
          "on SIGTERM, how long calls in flight may take to finish; 0..1h");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA bundle to verify the coordinators with; empty: plaintext");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM client certificate for mutual TLS (with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM key of --tls_cert_file");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name to expect in the coordinators' certificate instead of "
          "the target's host");

namespace stagger::agent {
namespace {

// Each problem appended as "--flag: what".
void CheckNumbers(const AgentFlags& f, std::vector<std::string>* errors) {
  if (f.threads < 1 || f.threads > kMaxThreads) {
    errors->push_back(absl::StrCat("--threads: must be in [1, ", kMaxThreads,
                                   "], got ", f.threads));
  }
  const int64_t queued = absl::GetFlag(FLAGS_max_queued_calls);
  if (queued < 1 || queued > static_cast<int64_t>(kMaxQueuedCalls)) {
    errors->push_back(absl::StrCat("--max_queued_calls: must be in [1, ",
                                   kMaxQueuedCalls, "], got ", queued));
  }
  if (f.max_waiting_calls < 0 || f.max_waiting_calls > kMaxWaitingCalls) {
    errors->push_back(absl::StrCat("--max_waiting_calls: must be in [0, ",
                                   kMaxWaitingCalls, "], got ",
                                   f.max_waiting_calls));
  }
  if (f.drain_timeout < absl::ZeroDuration() ||
      f.drain_timeout > absl::Hours(1)) {
    errors->push_back(absl::StrCat("--drain_timeout: must be in [0, 1h], got ",
                                   absl::FormatDuration(f.drain_timeout)));
  }
  if (!absl::StartsWith(f.listen, "unix:") &&
      f.listen.find(':') == std::string::npos) {
    errors->push_back(absl::StrCat(
        "--listen: want unix:/path or host:port, got \"", f.listen, "\""));
  }
}

absl::Status ReadFallback(client::ClientOptions* o) {
  const std::string mode = absl::GetFlag(FLAGS_fallback);
  if (mode == "fail_open") {
    o->fallback = client::FallbackMode::kFailOpen;
  } else if (mode == "fail_closed") {
    o->fallback = client::FallbackMode::kFailClosed;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fallback: want fail_open or fail_closed, got \"", mode, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AgentFlags> ReadAgentFlags() {
  AgentFlags f;
  std::vector<std::string> errors;
  f.listen = absl::GetFlag(FLAGS_listen);
  f.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  f.status_address = absl::GetFlag(FLAGS_status_address);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.max_queued_calls =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_max_queued_calls)));
  f.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  f.max_waiting_calls = absl::GetFlag(FLAGS_max_waiting_calls);
  CheckNumbers(f, &errors);
  client::ClientOptions& o = f.client;
  o.target = absl::GetFlag(FLAGS_coordinator);
  o.leases = absl::GetFlag(FLAGS_leases);
  o.lease_holder_id = absl::GetFlag(FLAGS_agent_id);
  o.lease_flush_interval = absl::GetFlag(FLAGS_flush_interval);
  o.call_deadline = absl::GetFlag(FLAGS_call_deadline);
  o.recheck_interval = absl::GetFlag(FLAGS_recheck_interval);
  if (absl::Status s = ReadFallback(&o); !s.ok()) {
    errors.emplace_back(s.message());
  }
  const std::string config = absl::GetFlag(FLAGS_config);
  if (!config.empty()) {
    absl::StatusOr<engine::EngineConfig> c = config::LoadConfigFile(config);
    if (c.ok()) {
      o.local_policy = *std::move(c);
    } else {
      errors.push_back(absl::StrCat("--config: ", c.status().message()));
    }
  }
  f.tls = {absl::GetFlag(FLAGS_tls_ca_file), absl::GetFlag(FLAGS_tls_cert_file),
           absl::GetFlag(FLAGS_tls_key_file),
           absl::GetFlag(FLAGS_tls_server_name)};
  if (absl::Status s = client::CheckClientTlsOptions(f.tls); !s.ok()) {
    errors.emplace_back(s.message());
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return f;
}

}  // namespace stagger::agent
