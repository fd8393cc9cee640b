// staggerd: the Stagger retry coordinator server. Thin wiring only:
// flags -> config -> engine -> gRPC service (+ health, reflection) ->
// metrics exposer -> config reloader -> signals.
//
//   --address          gRPC listen address (default 0.0.0.0:50051)
//   --config           textproto/JSON config file; embedded defaults if unset
//   --metrics_address  Prometheus /metrics address (default 0.0.0.0:9464;
//                      empty disables)
//   --drain_grace      on SIGTERM, keep serving this long after the health
//                      service turns NOT_SERVING (default 0s; set it to a
//                      few readiness-probe periods under Kubernetes)
//   --drain_timeout    then wait at most this long for in-flight calls
//                      (default 10s)
//   --state_file       snapshot of endpoint state: loaded at start (a bad
//                      or missing file is logged and counted, and the server
//                      starts fresh), saved periodically and after draining
//   --state_save_interval  how often (default 30s)
//   --max_receive_message_bytes, --max_concurrent_streams,
//   --min_ping_interval, --permit_pings_without_calls, --max_ping_strikes,
//   --max_connection_age, --max_connection_age_grace, --memory_quota_bytes
//                      transport limits (server/transport_flags.h)
//   --replicas         with several replicas: every replica's name,
//                      comma-separated (default empty: one replica)
//   --replica_name     this replica's name among them (default: $HOSTNAME,
//                      a StatefulSet pod's name); see service/ownership.h
//   --tls_cert_file, --tls_key_file   TLS on the gRPC port (PEM; re-read
//                      every --tls_refresh_interval, default 10s)
//   --tls_client_ca_file  mutual TLS: client certificates required and
//                      verified against this CA bundle
//   --authz_policy_file   gRFC A43 authorization policy (JSON), enforced
//                      per call; needs mutual TLS; reloaded on change
//   --health_address   a separate plaintext port serving the gRPC health
//                      service alone (for probes that cannot do TLS)
//
// Signals: SIGHUP reloads the config file now; SIGTERM/SIGINT drain
// (health NOT_SERVING, grace, finish in-flight calls) and exit 0.
// Exit codes: 0 clean shutdown, 1 start-up failure, 2 bad configuration.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/registry.h"
#include "server/config/config_loader.h"
#include "server/config/config_reloader.h"
#include "server/engine/clock.h"
#include "server/engine/engine.h"
#include "server/engine/random.h"
#include "server/metrics/metrics_exposer.h"
#include "server/metrics/server_metrics.h"
#include "server/security/security_setup.h"
#include "server/service/admin_service.h"
#include "server/service/coordinator_service.h"
#include "server/service/server_setup.h"
#include "server/state/state_keeper.h"
#include "server/transport_flags.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051", "gRPC listen address");
ABSL_FLAG(std::string, config, "",
          "config file (.textproto/.txtpb/.pbtxt or .json); embedded "
          "defaults if empty");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Prometheus /metrics listen address; empty disables");
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
ABSL_FLAG(std::string, health_address, "",
          "separate plaintext address serving only the gRPC health service; "
          "empty: none");

namespace stagger {
namespace {

void Log(const std::string& line) {
  std::fprintf(stderr, "staggerd: %s\n", line.c_str());
  std::fflush(stderr);
}

// Evicts idle endpoints every `period` until `stop` is notified.
void EvictionLoop(engine::Engine* engine, absl::Duration period,
                  absl::Notification* stop) {
  while (!stop->WaitForNotificationWithTimeout(period)) {
    engine->EvictIdle();
  }
}

// --state_file: restores the endpoint state before the first call is
// answered, then saves it every --state_save_interval. Null without it.
std::unique_ptr<state::StateKeeper> StartStateKeeper(
    engine::Engine* engine, metrics::ServerMetrics* metrics) {
  state::StateKeeper::Options options;
  options.path = absl::GetFlag(FLAGS_state_file);
  if (options.path.empty()) return nullptr;
  options.save_interval = absl::GetFlag(FLAGS_state_save_interval);
  options.log = Log;
  options.metrics = metrics;
  auto keeper = std::make_unique<state::StateKeeper>(
      engine, engine::RealClock::Instance(), std::move(options));
  keeper->Load();
  keeper->Start();
  return keeper;
}

// The signals staggerd handles, taken by sigwait() on the main thread.
sigset_t HandledSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

int Run() {
  const sigset_t signals = HandledSignals();
  const service::TransportLimits limits = TransportLimitsFromFlags();
  if (absl::Status s = service::ValidateTransportLimits(limits); !s.ok()) {
    Log(absl::StrCat("refusing to start: bad transport limits:\n", s.message()));
    return 2;
  }

  const std::string config_path = absl::GetFlag(FLAGS_config);
  engine::EngineConfig config = config::DefaultEngineConfig();
  std::optional<std::string> config_bytes;
  if (!config_path.empty()) {
    absl::StatusOr<std::string> bytes = config::ReadConfigFile(config_path);
    absl::StatusOr<engine::EngineConfig> loaded =
        bytes.ok() ? config::LoadConfigText(*bytes, config_path)
                   : absl::StatusOr<engine::EngineConfig>(bytes.status());
    if (!loaded.ok()) {
      Log("refusing to start: bad configuration:");
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    config = *std::move(loaded);
    config_bytes = *bytes;
    Log(absl::StrCat("config loaded from ", config_path));
  } else {
    Log("no --config: running on embedded defaults");
  }
  const absl::Duration idle_eviction = config.limits.idle_eviction;
  if (absl::GetFlag(FLAGS_state_save_interval) < absl::Seconds(1)) {
    Log(absl::StrCat("refusing to start: --state_save_interval must be >= 1s, got ",
                     absl::FormatDuration(absl::GetFlag(FLAGS_state_save_interval))));
    return 2;
  }

  engine::Engine engine(config, engine::RealClock::Instance(),
                        engine::PerThreadRandom::Instance());

  auto registry = std::make_shared<prometheus::Registry>();
  metrics::ServerMetrics server_metrics(
      *registry, metrics::ServerMetrics::MaxAttemptLabelFor(config));
  server_metrics.AttachEngine(&engine);
  std::unique_ptr<metrics::MetricsExposer> exposer;
  const std::string metrics_address = absl::GetFlag(FLAGS_metrics_address);
  if (!metrics_address.empty()) {
    auto started =
        metrics::MetricsExposer::Start(metrics_address, registry, &server_metrics);
    if (!started.ok()) {
      Log(absl::StrCat("cannot serve metrics: ", started.status().message()));
      return 1;
    }
    exposer = *std::move(started);
  }

  security::SecurityFlags security_flags;
  security_flags.tls = {absl::GetFlag(FLAGS_tls_cert_file),
                        absl::GetFlag(FLAGS_tls_key_file),
                        absl::GetFlag(FLAGS_tls_client_ca_file)};
  security_flags.tls_refresh_interval = absl::GetFlag(FLAGS_tls_refresh_interval);
  security_flags.authz_policy_file = absl::GetFlag(FLAGS_authz_policy_file);
  security_flags.authz_poll_interval = absl::GetFlag(FLAGS_authz_poll_interval);
  absl::StatusOr<std::unique_ptr<security::ServerSecurity>> made_security =
      security::ServerSecurity::Create(security_flags, *registry, Log);
  if (!made_security.ok()) {
    Log(absl::StrCat("refusing to start: ", made_security.status().message()));
    return 2;
  }
  std::unique_ptr<security::ServerSecurity> security = *std::move(made_security);

  std::unique_ptr<state::StateKeeper> keeper =
      StartStateKeeper(&engine, &server_metrics);

  service::CoordinatorService service(&engine, &server_metrics,
                                      engine::RealClock::Instance());
  const char* hostname = std::getenv("HOSTNAME");
  absl::StatusOr<std::optional<service::Ownership>> ownership =
      service::Ownership::FromFlags(absl::GetFlag(FLAGS_replicas),
                                    absl::GetFlag(FLAGS_replica_name),
                                    hostname != nullptr ? hostname : "");
  if (!ownership.ok()) {
    Log(absl::StrCat("refusing to start: ", ownership.status().message()));
    return 2;
  }
  if (ownership->has_value()) {
    service.set_ownership(&**ownership);
    Log(absl::StrCat("replica ", (*ownership)->self(), " of ",
                     (*ownership)->members().size()));
  }
  service::AdminService admin(&engine, &security->metrics(),
                              engine::RealClock::Instance(), Log);
  int port = 0;
  const std::string address = absl::GetFlag(FLAGS_address);
  absl::StatusOr<std::unique_ptr<grpc::Server>> started_server =
      service::StartServer(address, {&service, &admin}, security->credentials(),
                           &port, limits);
  if (!started_server.ok()) {
    Log(std::string(started_server.status().message()));
    return 1;
  }
  std::unique_ptr<grpc::Server> server = *std::move(started_server);
  std::unique_ptr<grpc::Server> health_server;
  int health_port = 0;
  if (const std::string a = absl::GetFlag(FLAGS_health_address); !a.empty()) {
    auto started = service::StartHealthServer(a, &health_port);
    if (!started.ok()) {
      Log(absl::StrCat("health port: ", started.status().message()));
      return 1;
    }
    health_server = *std::move(started);
  }
  security->StartReloading();

  std::unique_ptr<config::ConfigReloader> reloader;
  if (!config_path.empty()) {
    config::ConfigReloader::Options options;
    options.poll_interval = absl::GetFlag(FLAGS_config_poll_interval);
    options.applied_content = config_bytes;
    options.on_result = [&server_metrics](bool ok, const absl::Status&) {
      server_metrics.RecordConfigReload(ok);
    };
    reloader = std::make_unique<config::ConfigReloader>(config_path, &engine,
                                                        std::move(options));
    if (absl::Status s = reloader->Start(); !s.ok()) {
      Log(absl::StrCat("cannot watch config: ", s.message()));
      return 1;
    }
  }

  absl::Notification stop_eviction;
  std::thread eviction(EvictionLoop, &engine,
                       std::clamp(idle_eviction / 10, absl::Seconds(1),
                                  absl::Seconds(60)),
                       &stop_eviction);

  const std::string host = address.substr(0, address.rfind(':'));
  if (health_server) Log(absl::StrCat("health on port ", health_port));
  Log(absl::StrCat("gRPC port security: ", security->Describe()));
  Log(absl::StrCat(
      "listening on ", host, ":", port,
      exposer ? absl::StrCat(" (metrics on port ", exposer->port(), ")")
              : std::string(" (metrics disabled)")));

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (reloader) {
        Log("SIGHUP: reloading config");
        (void)reloader->ReloadNow();
      } else {
        Log("SIGHUP: no --config file to reload");
      }
      continue;
    }
    Log(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                     ": draining (health NOT_SERVING)"));
    break;
  }

  service::SetServing({server.get(), health_server.get()}, false);
  absl::SleepFor(absl::GetFlag(FLAGS_drain_grace));
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_drain_timeout)));
  server->Wait();
  if (keeper) keeper->Stop();  // the last snapshot, after the last answer
  if (health_server) {
    health_server->Shutdown(std::chrono::system_clock::now());
    health_server->Wait();
  }
  security->Stop();
  if (reloader) reloader->Stop();
  stop_eviction.Notify();
  eviction.join();
  Log("drained, exiting");
  return 0;
}

}  // namespace
}  // namespace stagger

int main(int argc, char** argv) {
  // Block the handled signals first thing, before any library can start a
  // thread, so every thread inherits the mask and a SIGTERM that arrives
  // during start-up is taken by sigwait() (a clean drain), never by the
  // default action.
  const sigset_t signals = stagger::HandledSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::SetProgramUsageMessage(
      "Stagger retry coordinator. See README.md; flags: --address, --config, "
      "--metrics_address, --drain_grace, --drain_timeout, --state_file, "
      "--state_save_interval, --replicas, --replica_name, --tls_cert_file, "
      "--tls_key_file, --tls_client_ca_file, --authz_policy_file, "
      "--health_address.");
  absl::ParseCommandLine(argc, argv);
  return stagger::Run();
}
