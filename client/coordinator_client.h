// CoordinatorClient: the C++ client of stagger.v1.RetryCoordinator that
// delivery workers use to ask "may I send attempt n now?" (Admit) and to
// report what happened (Report). See proto/stagger/v1/coordinator.proto for
// the meaning of every field and verdict; ClientDecision mirrors
// stagger.v1.Decision and says where the answer came from.
//
// Contract:
//   * Every RPC has a deadline (ClientOptions::call_deadline, default 50 ms,
//     real time).
//   * INVALID_ARGUMENT from the coordinator is the caller's bug and comes
//     back as an error status with the server's message (which names the
//     field). It is never masked by a fallback decision. The local engine
//     applies the same checks, so bad input is an error in fallback too.
//   * Any other failure -- UNAVAILABLE, DEADLINE_EXCEEDED, or any other
//     status code, or a response with no usable decision -- makes the client
//     consider the coordinator down and decide locally:
//       FAIL_OPEN (default): with an in-process engine::Engine built from
//         ClientOptions::local_policy: the server's policy code, so fallback
//         jitters, backs off, budgets and breaks the way the server would
//         (with this process's view of the endpoint only).
//       FAIL_CLOSED: DEFER, reason CIRCUIT_OPEN (the client's own "circuit"
//         to the coordinator is open: nothing is sent without the
//         coordinator's consent), defer_until spread uniformly over
//         [now + recheck_interval, now + 1.5 * recheck_interval); for a
//         failure Report the deferral is about attempt + 1. Answers that
//         send nothing are given locally: a SUCCESS report is DONE
//         (SUCCEEDED), a NOT_RETRYABLE report is GIVE_UP (NOT_RETRYABLE).
//     The decision's `source` is kLocalFallback and `fallback_cause` says
//     why.
//   * While the coordinator is considered down the client does not call it
//     (so callers do not pay the deadline on every call) until
//     recheck_interval has passed since the last failure; then one call
//     probes it (concurrent callers keep deciding locally meanwhile). The
//     first answer puts the client back on the coordinator.
//   * A background thread watches the channel (and, by waiting on it, polls
//     its connections: with the synchronous API nothing else does between
//     calls, and gRPC 1.51 would then notice a reconnect or a server's
//     GOAWAY only through its 5 s backup poller). It asks the channel to
//     reconnect whenever it goes idle, and when the channel becomes READY
//     while the coordinator is considered down, the next call probes it at
//     once instead of waiting for the rest of the recheck interval. It also
//     evicts the local engine's idle endpoints periodically (memory stays
//     bounded as in staggerd: local_policy.limits).
//   * Times: delays are durations; a coordinator DEFER is converted to the
//     client's clock from the response's defer_for (so the worker's and the
//     server's clocks need not agree), else taken from defer_until.
//
// Thread-safe: one client may be shared by every worker thread of a process.
#ifndef STAGGER_CLIENT_COORDINATOR_CLIENT_H_
#define STAGGER_CLIENT_COORDINATOR_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/client_metrics.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "prometheus/registry.h"
#include "server/engine/clock.h"
#include "server/engine/decision.h"
#include "server/engine/engine.h"
#include "server/engine/engine_config.h"
#include "server/engine/random.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::client {

enum class FallbackMode : uint8_t {
  kFailOpen = 1,    // decide locally with the local policy
  kFailClosed = 2,  // DEFER until the coordinator can be asked again
};

enum class DecisionSource : uint8_t {
  kCoordinator = 1,    // the coordinator's answer
  kLocalFallback = 2,  // decided in-process; see fallback_cause
};
const char* DecisionSourceName(DecisionSource s);  // "coordinator" / "local"

// A decision as the worker uses it. Field meanings as stagger.v1.Decision.
struct ClientDecision {
  engine::Verdict verdict = engine::Verdict::kProceed;
  engine::Reason reason = engine::Reason::kAdmitted;
  // kProceed: wait this long before sending (>= 0).
  absl::Duration delay = absl::ZeroDuration();
  // kDefer: call Admit again (same attempt) at this instant, on the clock of
  // ClientOptions::clock; defer_for is the same instant relative to the
  // moment the decision was received (>= 0). InfinitePast / zero otherwise.
  absl::Time defer_until = absl::InfinitePast();
  absl::Duration defer_for = absl::ZeroDuration();
  // The attempt the decision is about (Admit: the request's; failure
  // Report: attempt + 1).
  int attempt = 0;
  DecisionSource source = DecisionSource::kCoordinator;
  // kLocalFallback: the coordinator error that caused it, or UNAVAILABLE
  // "coordinator considered down" when the call was not even tried. OK for
  // kCoordinator.
  absl::Status fallback_cause;
};

// What RetryLoop (and tests) need from a coordinator. CoordinatorClient is
// the implementation; the interface exists so that loops can be tested with
// scripted decisions.
class Coordinator {
 public:
  virtual ~Coordinator() = default;
  virtual absl::StatusOr<ClientDecision> Admit(const engine::AdmitInput& in) = 0;
  virtual absl::StatusOr<ClientDecision> Report(
      const engine::ReportInput& in) = 0;

  // Conveniences over the two calls above. `deadline` InfiniteFuture and
  // `first_attempt_time` InfinitePast mean "not given".
  absl::StatusOr<ClientDecision> Admit(
      absl::string_view endpoint, int attempt,
      absl::Time deadline = absl::InfiniteFuture(),
      absl::Time first_attempt_time = absl::InfinitePast());
  absl::StatusOr<ClientDecision> Report(
      absl::string_view endpoint, int attempt, engine::Outcome outcome,
      std::optional<absl::Duration> retry_after = std::nullopt,
      absl::Time deadline = absl::InfiniteFuture(),
      absl::Time first_attempt_time = absl::InfinitePast());
};

struct ClientOptions {
  // gRPC target, e.g. "127.0.0.1:50051" or "dns:///stagger:50051". Ignored
  // if `channel` is set.
  std::string target = "127.0.0.1:50051";
  // Use this channel instead of creating one for `target` (tests, shared
  // channels). Optional.
  std::shared_ptr<grpc::Channel> channel;
  // Channel credentials; null means insecure (plaintext). For TLS/mTLS
  // use client::MakeChannelCredentials (client/tls_options.h).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // TLS: the name expected in the coordinator's certificate instead of the
  // target's host (ClientTlsOptions::server_name). Empty: the host.
  std::string tls_server_name;
  // Deadline of every RPC, real time. > 0, at most 1 minute. Default 50 ms.
  absl::Duration call_deadline = absl::Milliseconds(50);
  FallbackMode fallback = FallbackMode::kFailOpen;
  // Policy of the local engine used by FAIL_OPEN. Must pass
  // engine::ValidateEngineConfig. Default: the engine's (= staggerd's
  // embedded) defaults. Keep it equal to the server's config for fallback
  // to behave like the server.
  engine::EngineConfig local_policy;
  // After a coordinator error, decide locally without calling it for this
  // long; then probe it again. > 0, at most 1 hour. Default 1 s. Also the
  // channel's maximum reconnect backoff (when the client creates the
  // channel), so a coordinator that comes back is reconnected to promptly.
  absl::Duration recheck_interval = absl::Seconds(1);
  // Time for the local engine, the recheck interval and DEFER conversion.
  // Null: engine::RealClock. Must outlive the client.
  const engine::Clock* clock = nullptr;
  // Randomness for the local engine and the fail-closed spread. Null:
  // engine::PerThreadRandom (thread-safe). Must outlive the client and be
  // thread-safe if the client is used from several threads.
  engine::RandomSource* random = nullptr;
  // Registry for the client's metrics (see client_metrics.h). Null: the
  // client creates a private one, available from metrics_registry().
  std::shared_ptr<prometheus::Registry> registry;
};

class CoordinatorClient final : public Coordinator {
 public:
  // InvalidArgument if an option is out of range or local_policy does not
  // validate (the message lists the fields).
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Create(
      ClientOptions options);
  ~CoordinatorClient() override;

  using Coordinator::Admit;
  using Coordinator::Report;
  absl::StatusOr<ClientDecision> Admit(const engine::AdmitInput& in) override;
  absl::StatusOr<ClientDecision> Report(const engine::ReportInput& in) override;

  // Batch forms: 1..max_batch_size items, one decision per item in order.
  // On fallback the whole batch is validated first (an error names the
  // item, "items[3].endpoint: ...") and then decided item by item.
  absl::StatusOr<std::vector<ClientDecision>> AdmitBatch(
      absl::Span<const engine::AdmitInput> items);
  absl::StatusOr<std::vector<ClientDecision>> ReportBatch(
      absl::Span<const engine::ReportInput> items);

  // Waits (real time, up to `timeout`) for the channel to connect. Does not
  // change whether the client considers the coordinator up; useful before a
  // burst of calls at start-up.
  bool WaitForCoordinator(absl::Duration timeout);
  // Whether the client currently sends calls to the coordinator.
  bool coordinator_up() const;

  const std::shared_ptr<prometheus::Registry>& metrics_registry() const {
    return registry_;
  }
  const engine::Clock& clock() const { return *clock_; }
  const ClientOptions& options() const { return options_; }

 private:
  explicit CoordinatorClient(ClientOptions options);

  // Whether this call should go to the coordinator (claims the probe when
  // the coordinator is down and the recheck interval has passed).
  bool ShouldCallCoordinator();
  void MarkUp();
  void MarkDown(grpc::StatusCode code);
  // The channel watcher thread's body (see the file comment).
  void WatchChannel();
  // The channel became READY: if down, let the next call probe now.
  void OnChannelReady();
  // Deadline of one RPC.
  void PrepareContext(grpc::ClientContext* ctx) const;
  // Coordinator decision -> ClientDecision; INTERNAL if unusable.
  absl::StatusOr<ClientDecision> FromProto(const v1::Decision& d,
                                           absl::Time now) const;
  ClientDecision FromEngine(const engine::Decision& d, absl::Time now,
                            absl::Status cause) const;
  // FAIL_CLOSED answer.
  ClientDecision ClosedDefer(int attempt, absl::Status cause);
  // Handles a non-OK RPC status: InvalidArgument -> returned as error;
  // anything else -> recorded, and `cause` set (returns OK).
  absl::Status ClassifyRpcError(const grpc::Status& s, absl::Status* cause);

  absl::StatusOr<ClientDecision> LocalAdmit(const engine::AdmitInput& in,
                                            absl::Status cause);
  absl::StatusOr<ClientDecision> LocalReport(const engine::ReportInput& in,
                                             absl::Status cause);

  // The shape every call shares (defined in the .cc). If the coordinator is
  // to be called: fill(&req), call `rpc`, convert(resp). A usable answer
  // marks it up and is returned; INVALID_ARGUMENT is returned as the error;
  // any other RPC error, or an unusable answer (INTERNAL), marks it down and
  // becomes the fallback cause. Otherwise (or then) returns local(cause).
  template <typename Result, typename Req, typename Resp, typename Fill,
            typename Convert, typename Local>
  absl::StatusOr<Result> CallOrFallback(
      grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                      const Req&, Resp*),
      Fill fill, Convert convert, Local local);
  // A single call's answer; INTERNAL if it has no usable decision.
  template <typename Resp>
  absl::StatusOr<ClientDecision> FromResponse(const Resp& resp) const;
  // A batch's answer; INTERNAL unless it has n usable decisions.
  template <typename Resp>
  absl::StatusOr<std::vector<ClientDecision>> FromBatchResponse(
      const Resp& resp, size_t n) const;
  // Batch fallback: checks the size and validate()s every item (an error
  // names the item), then decide()s each item with `cause`.
  template <typename In>
  absl::StatusOr<std::vector<ClientDecision>> LocalBatch(
      absl::Span<const In> items,
      absl::Status (engine::Engine::*validate)(const In&) const,
      absl::StatusOr<ClientDecision> (CoordinatorClient::*decide)(
          const In&, absl::Status),
      const absl::Status& cause);

  const ClientOptions options_;
  const engine::Clock* clock_;
  engine::RandomSource* random_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ClientMetrics> metrics_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  std::unique_ptr<engine::Engine> local_;

  absl::Notification stop_watching_;
  std::thread watcher_;

  mutable absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = true;
  // While !up_: the earliest instant (clock_) at which to probe again.
  absl::Time next_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_COORDINATOR_CLIENT_H_
