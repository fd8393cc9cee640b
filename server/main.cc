// staggerd: the Stagger retry coordinator server. Wiring only: the flags,
// then the steps in server/daemon/ in order, each a unit whose header
// states its contract:
//   the first line (each port's interfaces and security) -> check the
//   flags (transport limits, config, state file, replicas, status peers)
//   -> engine -> the watch's log and feed -> status page (if asked) ->
//   metrics -> security -> state keeper -> services (and the watch's) ->
//   servers (gRPC port, health port) -> config watch -> eviction loop ->
//   wait for a signal -> drain.
//
// Flags: below and in transport_flags.cc; `staggerd --help` lists every one
// (core/cli/usage.h) and docs/OPERATING.md's "Flags" has each with its
// default and meaning (tests/server/flags_documented_test.py keeps the
// three in step).
// Signals: SIGHUP reloads the config file now; SIGTERM/SIGINT drain
// (health NOT_SERVING, grace, finish in-flight calls) and exit 0.
// Exit codes (daemon/exit_codes.h): 0 clean shutdown, 1 start-up failure,
// 2 bad configuration or flag.
#include <functional>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/cli/blocked_signals.h"
#include "core/cli/usage.h"
#include "server/daemon/config_watch.h"
#include "server/daemon/drain.h"
#include "server/daemon/endpoint_watch.h"
#include "server/daemon/eviction_loop.h"
#include "server/daemon/exit_codes.h"
#include "server/daemon/exposure.h"
#include "server/daemon/decision_services.h"
#include "server/daemon/log.h"
#include "server/daemon/metrics_stack.h"
#include "server/daemon/servers.h"
#include "server/daemon/signal_wait.h"
#include "server/daemon/startup_config.h"
#include "server/daemon/usage_message.h"
#include "server/daemon/state_file.h"
#include "server/daemon/status_page_step.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/replica_clock.h"
#include "server/security/security_setup.h"
#include "server/service/admin_service.h"
#include "server/service/coordinator_service.h"
#include "server/service/ownership.h"
#include "server/service/server_setup.h"
#include "server/transport_flags.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "gRPC listen address (host:port); the default serves this host "
          "alone, 0.0.0.0:50051 every interface");
ABSL_FLAG(std::string, config, "",
          "config file (.textproto/.txtpb/.pbtxt or .json); embedded "
          "defaults if empty");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "Prometheus /metrics listen address (host:port; 0.0.0.0:9464 for "
          "every interface); empty disables");
ABSL_FLAG(absl::Duration, drain_grace, absl::ZeroDuration(),
          "on SIGTERM, keep serving this long after health turns "
          "NOT_SERVING");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(10),
          "on SIGTERM, wait at most this long for in-flight calls");
ABSL_FLAG(absl::Duration, config_poll_interval, absl::Seconds(1),
          "how often the config file is checked for changes");
ABSL_FLAG(std::string, state_file, "",
          "snapshot of endpoint state (breakers, Retry-After windows, "
          "budgets, paces): loaded at start, saved every "
          "--state_save_interval and after draining; empty disables");
ABSL_FLAG(absl::Duration, state_save_interval, absl::Seconds(30),
          "how often --state_file is saved (>= 1s)");
ABSL_FLAG(std::string, replicas, "",
          "all replicas' names, comma-separated (stagger-0,stagger-1,...); "
          "requests for keys another replica owns are counted as misrouted");
ABSL_FLAG(std::string, replica_name, "",
          "this replica's name in --replicas (default: $HOSTNAME)");

ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain for TLS on the gRPC port (with "
          "--tls_key_file); empty: plaintext");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: clients must present a certificate it verifies "
          "(mutual TLS)");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(10),
          "how often the TLS files are re-read (rotation), 1s..1h");
ABSL_FLAG(std::string, authz_policy_file, "",
          "gRFC A43 authorization policy (JSON); needs mutual TLS");
ABSL_FLAG(absl::Duration, authz_poll_interval, absl::Seconds(1),
          "how often the authorization policy file is checked for changes");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(2),
          "how long the lease of a stagger-agent's stream lasts unless "
          "renewed (every message up renews it); also how long a half-open "
          "probe may wait for an agent that stopped answering; 0: grant "
          "none (agents ask this coordinator for everything); else 1s..10m");
ABSL_FLAG(int64_t, max_waiting_calls, 100000,
          "waiting Admits (AdmitRequest.wait) held at once; beyond it a "
          "waiting Admit is answered at once; 0: no waiting admission");
ABSL_FLAG(int64_t, max_agent_held_calls, 100000,
          "entries for waiting Admits that agents hold (over their lease "
          "streams) at once; beyond it such a call is answered at once; 0: "
          "agents' calls are answered at once");
ABSL_FLAG(std::string, health_address, "",
          "separate plaintext address serving only the gRPC health service; "
          "empty: none");
ABSL_FLAG(std::string, status_address, "",
          "read-only HTTP status page for operators (host:port); empty: off");
ABSL_FLAG(int64_t, watch_history_events, 100000,
          "the watch's history: at most this many events are kept for "
          "watchers that reconnect with a resume token");
ABSL_FLAG(absl::Duration, watch_history_age, absl::Hours(1),
          "the watch's history: no event older than this is kept");
ABSL_FLAG(std::string, status_peers, "",
          "where the status page asks peers' gRPC health (plaintext, e.g. "
          "their --health_address): name=host:port,... names from --replicas");

namespace stagger {
namespace {

// What the flags ask for, checked before anything starts.
struct CheckedFlags {
  service::TransportLimits limits;
  daemon::StartupConfig startup;
  daemon::StateFileOptions state_file;
  std::optional<service::Ownership> ownership;  // unset: one replica
  daemon::DrainOptions drain;
  absl::Duration lease_ttl;
  int64_t max_waiting_calls = 0;
  int64_t max_agent_held_calls = 0;
  status::StatusPageOptions status_page;
  service::WatchLog::Options watch;
};

// The name events and the status page give this replica: its name in
// --replicas, else --replica_name, $HOSTNAME or "staggerd".
std::string ReplicaName(const std::optional<service::Ownership>& ownership) {
  if (ownership.has_value()) return ownership->self();
  if (!absl::GetFlag(FLAGS_replica_name).empty()) {
    return absl::GetFlag(FLAGS_replica_name);
  }
  const char* hostname = std::getenv("HOSTNAME");
  return hostname != nullptr && *hostname != '\0' ? hostname : "staggerd";
}

absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// The watch's history flags, and the name its events give this replica.
absl::Status CheckWatch(CheckedFlags* checked) {
  checked->watch.replica = ReplicaName(checked->ownership);
  checked->watch.max_events = absl::GetFlag(FLAGS_watch_history_events);
  checked->watch.max_age = absl::GetFlag(FLAGS_watch_history_age);
  return daemon::CheckWatchFlags(checked->watch);
}

// Every refusal that needs nothing started: transport limits, the config
// file, the state file's interval, the config poll interval, the drain
// times, the replicas.
absl::StatusOr<CheckedFlags> CheckFlags() {
  CheckedFlags checked;
  checked.limits = TransportLimitsFromFlags();
  if (absl::Status s = service::ValidateTransportLimits(checked.limits);
      !s.ok()) {
    return Prefixed("bad transport limits:\n", s);
  }
  absl::StatusOr<daemon::StartupConfig> startup =
      daemon::LoadStartupConfig(absl::GetFlag(FLAGS_config));
  if (!startup.ok()) return Prefixed("bad configuration:\n", startup.status());
  checked.startup = *std::move(startup);
  checked.state_file = {absl::GetFlag(FLAGS_state_file),
                        absl::GetFlag(FLAGS_state_save_interval)};
  if (absl::Status s = daemon::CheckStateFile(checked.state_file); !s.ok()) {
    return s;
  }
  if (absl::Status s = daemon::CheckConfigPollInterval(
          absl::GetFlag(FLAGS_config_poll_interval));
      !s.ok()) {
    return s;
  }
  checked.drain = {absl::GetFlag(FLAGS_drain_grace),
                   absl::GetFlag(FLAGS_drain_timeout)};
  if (absl::Status s = daemon::CheckDrainOptions(checked.drain); !s.ok()) {
    return s;
  }
  checked.lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  if (absl::Status s = daemon::CheckLeaseTtl(checked.lease_ttl); !s.ok()) {
    return s;
  }
  checked.max_waiting_calls = absl::GetFlag(FLAGS_max_waiting_calls);
  if (absl::Status s = daemon::CheckMaxWaitingCalls("max_waiting_calls",
                                                    checked.max_waiting_calls);
      !s.ok()) {
    return s;
  }
  checked.max_agent_held_calls = absl::GetFlag(FLAGS_max_agent_held_calls);
  if (absl::Status s = daemon::CheckMaxWaitingCalls(
          "max_agent_held_calls", checked.max_agent_held_calls);
      !s.ok()) {
    return s;
  }
  const char* hostname = std::getenv("HOSTNAME");
  absl::StatusOr<std::optional<service::Ownership>> ownership =
      service::Ownership::FromFlags(absl::GetFlag(FLAGS_replicas),
                                    absl::GetFlag(FLAGS_replica_name),
                                    hostname != nullptr ? hostname : "");
  if (!ownership.ok()) return ownership.status();
  checked.ownership = *std::move(ownership);
  absl::StatusOr<status::StatusPageOptions> status_page =
      daemon::CheckStatusPage(absl::GetFlag(FLAGS_status_address),
                              absl::GetFlag(FLAGS_status_peers),
                              checked.ownership);
  if (!status_page.ok()) return status_page.status();
  checked.status_page = *std::move(status_page);
  if (absl::Status s = CheckWatch(&checked); !s.ok()) return s;
  return checked;
}

security::SecurityFlags SecurityFlagsFromFlags() {
  security::SecurityFlags flags;
  flags.tls = {absl::GetFlag(FLAGS_tls_cert_file),
               absl::GetFlag(FLAGS_tls_key_file),
               absl::GetFlag(FLAGS_tls_client_ca_file)};
  flags.tls_refresh_interval = absl::GetFlag(FLAGS_tls_refresh_interval);
  flags.authz_policy_file = absl::GetFlag(FLAGS_authz_policy_file);
  flags.authz_poll_interval = absl::GetFlag(FLAGS_authz_poll_interval);
  return flags;
}

// Logs "<prefix><status message>" and returns `exit_code`.
int Fail(int exit_code, absl::string_view prefix, const absl::Status& status) {
  daemon::Log(absl::StrCat(prefix, status.message()));
  return exit_code;
}

// The lines operators and tests wait for; "listening on" comes last.
void LogReady(const std::string& address, const daemon::Servers& servers,
              const security::ServerSecurity& security,
              const daemon::MetricsStack& metrics) {
  if (servers.health_server) {
    daemon::Log(absl::StrCat("health on port ", servers.health_port));
  }
  daemon::Log(absl::StrCat("gRPC port security: ", security.Describe()));
  const std::string host = address.substr(0, address.rfind(':'));
  daemon::Log(absl::StrCat(
      "listening on ", host, ":", servers.port,
      metrics.serving()
          ? absl::StrCat(" (metrics on port ", metrics.exposer_port(), ")")
          : std::string(" (metrics disabled)")));
}

// With several replicas, the coordinator counts the requests for keys
// another replica owns.
void LogOwnership(const std::optional<service::Ownership>& ownership) {
  if (!ownership.has_value()) return;
  daemon::Log(absl::StrCat("replica ", ownership->self(), " of ",
                           ownership->members().size()));
}

// How each replica's not-clear set is attached: it hears of conditions and
// pauses through the watch's fan-outs, as the watch does, not from the
// engine directly (one listener slot per engine).
std::function<void(lease::ReplicaSync&)> FedByTheWatch(
    daemon::EndpointWatch& watch) {
  return [&watch](lease::ReplicaSync& set) {
    watch.fan_out().Add(&set);
    watch.pause_fan_out().Add([&set](const engine::Pause& p, bool removed) {
      set.OnPause(p, removed);
    });
    set.AttachToEngine(/*feeds=*/false);
  };
}

// What the gRPC port serves: the decisions' services and the watch.
std::vector<grpc::Service*> Served(daemon::DecisionServices& services,
                                   daemon::EndpointWatch& watch) {
  std::vector<grpc::Service*> served = services.services();
  served.push_back(watch.service());  // stagger.v1.EndpointWatch
  return served;
}

// From the metrics to the drain; returns the exit code. `status_page` (null
// when off) outlives the metrics, which count decisions into its chart.
int Serve(const CheckedFlags& flags, engine::Engine& engine,
          daemon::EndpointWatch& watch, status::StatusPage* status_page) {
  auto metrics = daemon::MetricsStack::Start(
      absl::GetFlag(FLAGS_metrics_address), flags.startup.config, &engine);
  if (!metrics.ok()) {
    return Fail(daemon::kExitStartupFailure, "cannot serve metrics: ",
                metrics.status());
  }
  watch.HookMetrics((*metrics)->metrics());
  auto port_security = security::ServerSecurity::Create(
      SecurityFlagsFromFlags(), (*metrics)->registry(), daemon::Log);
  if (!port_security.ok()) {
    return Fail(daemon::kExitBadConfig, "refusing to start: ",
                port_security.status());
  }
  LogOwnership(flags.ownership);
  // Before the state file loads: the lease set hears of the restored
  // conditions and pauses through the watch's fan-outs, as the watch does.
  daemon::DecisionServices services(
      &engine,
      {flags.lease_ttl, flags.max_waiting_calls, flags.max_agent_held_calls,
       flags.ownership ? &*flags.ownership : nullptr, FedByTheWatch(watch)},
      (*metrics)->metrics(), &(*port_security)->metrics());
  std::unique_ptr<state::StateKeeper> keeper = daemon::StartStateKeeper(
      flags.state_file, &engine, (*metrics)->metrics());
  daemon::HookStatusPage(status_page, (*metrics)->metrics());
  watch.Start();
  // The refresher calls the lease set (in `services`): it stops first.
  absl::Cleanup stop_refresher = [&watch] { watch.StopRefresher(); };
  const std::vector<grpc::Service*> served = Served(services, watch);
  const std::string address = absl::GetFlag(FLAGS_address);
  auto servers = daemon::StartServers(
      {address, absl::GetFlag(FLAGS_health_address), flags.limits,
       (*port_security)->credentials()},
      served);
  if (!servers.ok()) {
    return Fail(daemon::kExitStartupFailure, "", servers.status());
  }
  (*port_security)->StartReloading();
  auto reloader = daemon::StartConfigWatch(
      flags.startup, absl::GetFlag(FLAGS_config_poll_interval), &engine,
      (*metrics)->metrics(), [&services] { services.OnConfigReloaded(); });
  if (!reloader.ok()) {
    return Fail(daemon::kExitStartupFailure, "cannot watch config: ",
                reloader.status());
  }
  daemon::EvictionLoop eviction(&engine);
  eviction.Start();
  LogReady(address, *servers, **port_security, **metrics);
  daemon::WaitForShutdownSignal(reloader->get());
  daemon::Drain(*servers, flags.drain,
                {/*before_close=*/[&] { services.BeforeClose(); watch.Shutdown(); },
                 /*after_last_answer=*/[&keeper] {
                   if (keeper) keeper->Stop();  // the last snapshot
                 }});
  (*port_security)->Stop();
  if (*reloader) (*reloader)->Stop();
  eviction.Stop();
  daemon::Log("drained, exiting");
  return daemon::kExitClean;
}

// The first line: each port's interfaces and security, as the flags ask.
void LogExposure() {
  daemon::Log(daemon::ExposureLine(
      {absl::GetFlag(FLAGS_address), absl::GetFlag(FLAGS_metrics_address),
       absl::GetFlag(FLAGS_health_address),
       absl::GetFlag(FLAGS_status_address), SecurityFlagsFromFlags()}));
}

int Run() {
  LogExposure();
  absl::StatusOr<CheckedFlags> flags = CheckFlags();
  if (!flags.ok()) {
    return Fail(daemon::kExitBadConfig, "refusing to start: ", flags.status());
  }
  // Wall time that never steps while staggerd runs (lease/replica_clock.h);
  // everything beside the engine reads the engine's clock.
  const std::unique_ptr<engine::Clock> clock = lease::ReplicaEngineClock(
      engine::RealClock::Instance(), engine::MonotonicClock::Instance());
  engine::Engine engine(flags->startup.config, clock.get(),
                        engine::PerThreadRandom::Instance());
  // Before anything changes the engine: its changes and pauses feed the
  // watch's log from the first one (the state file's restored ones too).
  daemon::EndpointWatch watch(&engine, flags->watch);
  auto status_page =
      daemon::StartStatusPage(flags->status_page, &engine, &watch.log());
  if (!status_page.ok()) {
    return Fail(daemon::kExitStartupFailure, "", status_page.status());
  }
  return Serve(*flags, engine, watch, status_page->get());
}

}  // namespace
}  // namespace stagger

int main(int argc, char** argv) {
  stagger::cli::BlockHandledSignals();  // before any thread exists
  stagger::cli::InstallUsage(stagger::daemon::UsageMessage(), "server");
  absl::ParseCommandLine(argc, argv);
  return stagger::Run();
}
