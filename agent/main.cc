// stagger-agent: the Stagger coordinator's API on a node (or as a sidecar),
// for workers in any language. It serves stagger.v1.RetryCoordinator on
// --listen (agent_service.h) and answers what it may under the
// coordinators' leases itself, asking them for the rest over one
// CoordinatorClient (client/coordinator_client.h, leases on): healthy
// deliveries cost the coordinators nothing but a count every flush, and
// workers get sharding and the fail-open fallback without a library.
//
// Start-up order: flags (exit 2 on a bad one, naming it), the first line
// (each port's interfaces and security), the client, the
// gRPC server on --listen (exit 1 if it cannot listen, or if another
// process already answers on its unix socket), /metrics, the status page
// (--status_address; exit 2 if malformed, 1 if it cannot be bound), then
// the "listening on" line. SIGTERM/SIGINT: stop taking calls, let those in
// flight finish (--drain_timeout), send the last counts, exit 0.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/agent_flags.h"
#include "agent/agent_service.h"
#include "agent/status/agent_status_page.h"
#include "agent/status/decision_tally.h"
#include "agent/work_pool.h"
#include "client/coordinator_client.h"
#include "core/cli/blocked_signals.h"
#include "core/cli/listen_scope.h"
#include "core/cli/usage.h"
#include "core/metrics/metrics_exposer.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace stagger::agent {
namespace {

constexpr int kExitClean = 0;
constexpr int kExitStartupFailure = 1;
constexpr int kExitBadFlag = 2;

void Log(absl::string_view line) {
  std::fprintf(stderr, "stagger-agent: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

// The client's option names as the agent's flags.
std::string AsFlags(absl::string_view message) {
  return absl::StrReplaceAll(
      absl::StrCat("\n", message),
      {{"\ntarget: ", "\n--coordinator: "},
       {"\nlease_flush_interval: ", "\n--flush_interval: "},
       {"\nlease_holder_id: ", "\n--agent_id: "},
       {"\ncall_deadline: ", "\n--call_deadline: "},
       {"\nrecheck_interval: ", "\n--recheck_interval: "},
       {"\nlocal_policy.", "\n--config: "}}).substr(1);
}

std::string UsageMessage() {
  return absl::StrCat(
      "stagger-agent: the Stagger coordinator's API for the workers of a "
      "node, on --listen; first attempts and successes on healthy endpoints "
      "are answered here under the coordinators' leases, the rest by the "
      "coordinators (--coordinator), or by the fallback when none answers. "
      "SIGTERM/SIGINT: finish the calls in flight and exit ", kExitClean,
      ". Exit codes: ", kExitClean, " clean shutdown, ", kExitStartupFailure,
      " start-up failure, ", kExitBadFlag, " bad flag.");
}

// Whether another process answers on the unix socket `listen` names: a
// second agent on the same path would take it over, and the first one's
// exit would then unlink it. A stale socket file (nobody answering) is
// not in use: gRPC replaces it.
bool SocketInUse(const std::string& listen) {
  if (!absl::StartsWith(listen, "unix:")) return false;
  const std::string path = listen.substr(5);
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answered =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return answered;
}

std::unique_ptr<grpc::Server> StartServer(const std::string& listen,
                                          AgentService* service, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server != nullptr) {
    server->GetHealthCheckService()->SetServingStatus(true);
  }
  return server;
}

// The coordinator client the flags ask for; exit code on failure.
absl::StatusOr<std::unique_ptr<client::CoordinatorClient>> MakeClient(
    AgentFlags& flags) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      client::MakeChannelCredentials(flags.tls);
  if (!creds.ok()) return creds.status();
  flags.client.credentials = *creds;
  flags.client.tls_server_name = flags.tls.server_name;
  absl::StatusOr<std::unique_ptr<client::CoordinatorClient>> client =
      client::CoordinatorClient::Create(flags.client);
  if (!client.ok()) {
    return absl::InvalidArgumentError(AsFlags(client.status().message()));
  }
  return client;
}

// The first line: which interfaces each of the agent's ports serves, with
// what security, and how it reaches the coordinators. By default:
//   serving workers on unix:/run/stagger/agent.sock (this host only, a Unix
//   socket), plaintext, no authorization; metrics on 127.0.0.1:9465
//   (loopback only, plain HTTP); no status page; coordinators
//   127.0.0.1:50051 over plaintext
std::string ExposureLine(const AgentFlags& flags) {
  const auto port = [](const std::string& address, const char* how) {
    return absl::StrCat(address, " (", cli::ListenScope(address), ", ", how,
                        ")");
  };
  const char* coordinators = !flags.tls.enabled()        ? "plaintext"
                             : flags.tls.cert_file.empty() ? "TLS"
                                                           : "mutual TLS";
  return absl::StrCat(
      "serving workers on ", cli::DescribeListen(flags.listen),
      ", plaintext, no authorization; ",
      flags.metrics_address.empty()
          ? std::string("no metrics")
          : absl::StrCat("metrics on ",
                         port(flags.metrics_address, "plain HTTP")),
      "; ",
      flags.status_address.empty()
          ? std::string("no status page")
          : absl::StrCat("status page on ",
                         port(flags.status_address, "plain HTTP, no login")),
      "; coordinators ", flags.client.target, " over ", coordinators);
}

std::string ReadyLine(const AgentFlags& flags, int port,
                      const metrics::MetricsExposer* exposer) {
  return absl::StrCat(
      "listening on ",
      absl::StartsWith(flags.listen, "unix:")
          ? flags.listen
          : absl::StrCat(flags.listen.substr(0, flags.listen.rfind(':')), ":",
                         port),
      " (coordinator ", flags.client.target, ", leases ",
      flags.client.leases ? "on" : "off",
      exposer ? absl::StrCat(", metrics on port ", exposer->port())
              : std::string(", metrics disabled"),
      ")");
}

// /metrics on `address` (null when it is empty: no metrics).
absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> StartMetrics(
    const std::string& address, const client::CoordinatorClient& client) {
  if (address.empty()) return nullptr;
  return metrics::MetricsExposer::Start(address, client.metrics_registry(),
                                        nullptr);
}

// The page on --status_address, reading `client`'s lease state and
// `tally`.
absl::StatusOr<std::unique_ptr<AgentStatusPage>> StartStatusPage(
    const AgentFlags& flags, const client::CoordinatorClient* client,
    const DecisionTally* tally, const AgentService* service) {
  AgentInfo info;
  info.coordinator = flags.client.target;
  info.fallback = flags.client.fallback == client::FallbackMode::kFailOpen
                      ? "fail_open"
                      : "fail_closed";
  info.leases = flags.client.leases;
  info.waiting = [service] {
    return WaitingCounts{service->waiting_calls(), service->waiting_overflows()};
  };
  return AgentStatusPage::Start(
      flags.status_address, std::move(info),
      [client](absl::string_view after, size_t max) {
        return client->lease_status(after, max);
      },
      tally, &client->clock());
}

// Until SIGTERM/SIGINT, then the drain.
void ServeUntilSignal(grpc::Server& server, absl::Duration drain_timeout) {
  const int sig = cli::WaitForShutdownSignal(nullptr);
  Log(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   ": finishing calls in flight"));
  server.GetHealthCheckService()->SetServingStatus(false);
  server.Shutdown(std::chrono::system_clock::now() +
                  absl::ToChronoMilliseconds(drain_timeout));
  server.Wait();
  Log("drained, exiting");
}

int Run() {
  absl::StatusOr<AgentFlags> flags = ReadAgentFlags();
  if (!flags.ok()) {
    Log(absl::StrCat("refusing to start:\n", flags.status().message()));
    return kExitBadFlag;
  }
  Log(ExposureLine(*flags));
  absl::StatusOr<std::unique_ptr<client::CoordinatorClient>> client =
      MakeClient(*flags);
  if (!client.ok()) {
    Log(absl::StrCat("refusing to start:\n", client.status().message()));
    return kExitBadFlag;
  }
  if (SocketInUse(flags->listen)) {
    Log(absl::StrCat("cannot listen on --listen ", flags->listen,
                     ": another process serves it"));
    return kExitStartupFailure;
  }
  WorkPool pool(flags->threads, flags->max_queued_calls);
  // Counted only for the status page.
  std::unique_ptr<DecisionTally> tally;
  if (!flags->status_address.empty()) {
    tally = std::make_unique<DecisionTally>(&(*client)->clock());
  }
  AgentService service(client->get(), &pool, tally.get(),
                       flags->max_waiting_calls);
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      StartServer(flags->listen, &service, &port);
  if (server == nullptr) {
    Log(absl::StrCat("cannot listen on --listen ", flags->listen,
                     " (its folder missing, or the port taken?)"));
    return kExitStartupFailure;
  }
  absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> exposer =
      StartMetrics(flags->metrics_address, **client);
  if (!exposer.ok()) {
    Log(absl::StrCat("cannot serve metrics: ", exposer.status().message()));
    return kExitStartupFailure;
  }
  std::unique_ptr<AgentStatusPage> status_page;
  if (tally != nullptr) {
    absl::StatusOr<std::unique_ptr<AgentStatusPage>> started =
        StartStatusPage(*flags, client->get(), tally.get(), &service);
    if (!started.ok()) {
      Log(absl::StrCat("cannot serve the status page: ",
                       started.status().message()));
      return absl::IsInvalidArgument(started.status()) ? kExitBadFlag
                                                       : kExitStartupFailure;
    }
    status_page = *std::move(started);
    Log(absl::StrCat("status page on port ", status_page->port()));
  }
  Log(ReadyLine(*flags, port, exposer->get()));
  ServeUntilSignal(*server, flags->drain_timeout);
  return kExitClean;
}

}  // namespace
}  // namespace stagger::agent

int main(int argc, char** argv) {
  stagger::cli::BlockHandledSignals();  // before any thread exists
  stagger::cli::InstallUsage(stagger::agent::UsageMessage(), "agent");
  absl::ParseCommandLine(argc, argv);
  return stagger::agent::Run();
}
