// CoordinatorClient: the C++ client of stagger.v1.RetryCoordinator that
// delivery workers use to ask "may I send attempt n now?" (Admit) and to
// report what happened (Report). See proto/stagger/v1/coordinator.proto for
// the meaning of every field and verdict; ClientDecision mirrors
// stagger.v1.Decision and says where the answer came from.
//
// Contract:
//   * Sharding. `target` may name several coordinator replicas (a list, or
//     dns:/// of a headless Service; see client/coordinator_target.h for the forms and
//     how each replica's stable name is learned). Every endpoint key is
//     owned by one replica, chosen by rendezvous hashing over the names
//     (core/wire/rendezvous.h, the hashing staggerd's --replicas uses), and
//     each call goes to its key's owner over that replica's own channel; a
//     batch is split by owner and the answers put back in order. A replica
//     that is considered down (below) or whose health service says
//     NOT_SERVING is skipped: its keys go to each key's next choice until
//     it is back, then return; keys of the other replicas never move. Only
//     when no replica can take a key is it decided locally (fallback).
//   * Every RPC has a deadline (ClientOptions::call_deadline, default 50 ms,
//     real time).
//   * INVALID_ARGUMENT from the coordinator is the caller's bug and comes
//     back as an error status with the server's message (which names the
//     field). It is never masked by a fallback decision. The local engine
//     applies the same checks, so bad input is an error in fallback too.
//   * Any other failure -- UNAVAILABLE, DEADLINE_EXCEEDED, or any other
//     status code, or a response with no usable decision -- makes the client
//     consider that replica down and decide this call locally:
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
//   * Per replica: while it is considered down the client does not call it
//     (so callers do not pay the deadline on every call) until
//     recheck_interval has passed since the last failure; then one call
//     probes it (concurrent callers of its keys go to their next choice,
//     or decide locally, meanwhile). Its first answer puts it back.
//   * A background thread per replica watches its channel (and, by waiting on it, polls
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
// The headers in client/ are the client's whole public surface: Abseil and
// the value types shared with the server (core/engine/decision.h,
// engine_config.h, clock.h, random.h, all Abseil-only). gRPC,
// prometheus-cpp, the generated stub and the local engine live behind
// CoordinatorClient::Impl in client/internal/; gRPC and prometheus types
// appear only as forward declarations for options that pass them through
// (the layering test, tests/layering, holds every public header to this).
//
// Thread-safe: one client may be shared by every worker thread of a process.
#ifndef STAGGER_CLIENT_COORDINATOR_CLIENT_H_
#define STAGGER_CLIENT_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/lease_status.h"
#include "client/coordinator_target.h"
#include "client/wait.h"
#include "core/engine/clock.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "core/lease/time_bounds.h"

// Passed through ClientOptions only; never dereferenced by this header.
namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc
namespace prometheus {
class Registry;
}  // namespace prometheus

namespace stagger::client {

// The two decision calls (metric label "call", RetryLoop events).
enum class Call : uint8_t { kAdmit = 0, kReport = 1 };
const char* CallName(Call c);  // "admit" / "report"

// A call's named inputs: the engine's own value types, shared with the
// server (field meanings as stagger.v1.AdmitRequest / ReportRequest).
// `endpoint` is borrowed for the duration of the call. Set the fields by
// name; an unset deadline (InfiniteFuture) or first_attempt_time
// (InfinitePast) is not sent.
using AdmitRequest = engine::AdmitInput;
using ReportRequest = engine::ReportInput;

enum class FallbackMode : uint8_t {
  kFailOpen = 1,    // decide locally with the local policy
  kFailClosed = 2,  // DEFER until the coordinator can be asked again
};

enum class DecisionSource : uint8_t {
  kCoordinator = 1,    // the coordinator's answer
  kLocalFallback = 2,  // decided in-process; see fallback_cause
  kLease = 3,          // answered in-process under a coordinator's lease
};
// "coordinator" / "local" / "lease"
const char* DecisionSourceName(DecisionSource s);

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
  // Report: the attempt to Admit next, attempt + 1, or the same attempt
  // when the failure used up none: proto Decision.attempt).
  int attempt = 0;
  // PROCEED to an Admit: the admission token to echo in this attempt's
  // Report (ReportRequest::admission; RetryLoop does it). 0 otherwise.
  uint64_t admission = 0;
  DecisionSource source = DecisionSource::kCoordinator;
  // The coordinator (or stagger-agent) that answered holds waiting calls
  // (proto Decision.wait_supported): RetryLoop then asks it, instead of
  // sleeping, for backoffs and parked deliveries.
  bool wait_supported = false;
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
  virtual absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in) = 0;
  virtual absl::StatusOr<ClientDecision> Report(const ReportRequest& in) = 0;
  // A waiting Admit (in.wait > 0; proto AdmitRequest.wait): the
  // coordinator holds it until the attempt may go or the wait runs out.
  // `cancel` (may be null) ends it early with CANCELLED. The default asks
  // Admit(in).
  virtual absl::StatusOr<ClientDecision> AdmitWaiting(const AdmitRequest& in,
                                                      const Canceller* cancel) {
    return Admit(in);
  }
};

struct ClientOptions {
  // The coordinator: one gRPC target ("127.0.0.1:50051"), a list of
  // replicas ("stagger-0=10.0.0.5:50051,stagger-1=10.0.0.6:50051" or pod
  // DNS names), or "dns:///stagger-headless.ns.svc:50051" (every address,
  // named by its reverse DNS name). See client/coordinator_target.h. Ignored if
  // `channel` is set.
  std::string target = "127.0.0.1:50051";
  // Use this channel instead of creating one for `target` (tests, shared
  // channels; one replica). Optional.
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
  // How often a dns:/// target is resolved again (members come and go).
  // > 0, at most 1 hour. Default 5 s.
  absl::Duration dns_refresh = absl::Seconds(5);
  // How a dns:/// target's members are found, at start and every
  // dns_refresh. Null: ResolveDnsMembers (A/AAAA records, each member named
  // by its PTR name; client/coordinator_target.h).
  MemberResolver resolve_members;
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

  // Leases (proto/stagger/v1/sync.proto): keep a lease stream to each
  // replica and, on endpoints the coordinator says are clear, answer first
  // attempts (PROCEED, INITIAL_JITTER) and SUCCESS reports (DONE) here,
  // counting them to the coordinator every lease_flush_interval; failures,
  // retries and everything else still go to the coordinator (after this
  // endpoint's counts). This is what stagger-agent runs. Default off.
  bool leases = false;
  // The name the coordinators know this client by: 1..256 bytes. Empty:
  // the host name.
  std::string lease_holder_id;
  // How often counts of local answers go up: (0, 1s]. Default 1 s. The
  // lease is renewed at least twice per ttl whatever this says.
  absl::Duration lease_flush_interval = lease::kDefaultFlushInterval;
};

class CoordinatorClient final : public Coordinator {
 public:
  // InvalidArgument if an option is out of range or local_policy does not
  // validate (the message lists the fields).
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Create(
      ClientOptions options);
  ~CoordinatorClient() override;
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in) override;
  absl::StatusOr<ClientDecision> Report(const ReportRequest& in) override;
  // Waiting calls go on a channel of their own to each replica (they must
  // not fill the HTTP/2 streams other calls need), with a deadline of
  // in.wait + kWaitMargin instead of call_deadline. Any failure decides
  // locally at once, as Admit does (the local engine holds nothing).
  absl::StatusOr<ClientDecision> AdmitWaiting(const AdmitRequest& in,
                                              const Canceller* cancel) override;
  // The same without blocking: `done` runs once, on a gRPC thread (or on
  // this one, for an answer given without a call). `answer_by` (real
  // time; a server relaying its caller's deadline, as stagger-agent does)
  // bounds when `done` runs: what the coordinator has not answered by then
  // is decided by the fallback then. With leases the call is held over the
  // replica's lease stream; it is answered by min(in.wait + 250 ms,
  // answer_by) whatever that stream does (SyncSession::kHeldGrace). If the
  // stream breaks, or the replica leaves the members, the rest of the wait
  // goes to the key's owner as a waiting call of its own (or to the
  // fallback).
  using AdmitDone = std::function<void(absl::StatusOr<ClientDecision>)>;
  void AdmitWaitingAsync(const AdmitRequest& in, const Canceller* cancel,
                         AdmitDone done,
                         absl::Time answer_by = absl::InfiniteFuture());
  static constexpr absl::Duration kWaitMargin = absl::Seconds(1);
  // Keepalive (with leases): each replica's channel, which carries its
  // lease stream, is pinged after kKeepaliveTime without a ping; a replica
  // that does not acknowledge within kKeepaliveTimeout (or leaves a write
  // unacknowledged as long) is cut off. A dead or partitioned replica thus
  // breaks the stream within 5 s; its held calls go another way. staggerd
  // permits a ping every 2 s (--min_ping_interval).
  static constexpr absl::Duration kKeepaliveTime = absl::Seconds(3);
  static constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(2);

  // The answer to `in` if this client can give it without calling anyone
  // (under a lease, ClientOptions::leases); nullopt otherwise (Admit /
  // Report would call the coordinator or decide by fallback). Never
  // blocks: a server answering many callers (stagger-agent) answers these
  // inline and hands the rest to threads that may block.
  std::optional<ClientDecision> AdmitUnderLease(const AdmitRequest& in);
  std::optional<ClientDecision> ReportUnderLease(const ReportRequest& in);

  // Batch forms: 1..max_batch_size items, one decision per item in order.
  // The size and item checks and their messages are the server's
  // ("items[3].endpoint: ..."); on fallback the whole batch is validated
  // first and then decided item by item.
  absl::StatusOr<std::vector<ClientDecision>> AdmitBatch(
      absl::Span<const AdmitRequest> items);
  absl::StatusOr<std::vector<ClientDecision>> ReportBatch(
      absl::Span<const ReportRequest> items);

  // Waits (real time, up to `timeout`) for every replica's channel to
  // connect (true if all did). Does not change whether the client considers
  // the coordinator up; useful before a burst of calls at start-up.
  bool WaitForCoordinator(absl::Duration timeout);
  // Whether the client currently sends calls to the coordinator (to at
  // least one replica).
  bool coordinator_up() const;

  // A replica by its stable name and the gRPC target of its channel.
  struct ReplicaId {
    std::string name;
    std::string target;
  };
  // The current members, and the one that owns `key` (by hashing alone,
  // whatever its health; empty while there are no members).
  std::vector<ReplicaId> replicas() const;
  ReplicaId OwnerOf(absl::string_view key) const;

  // The replicas, their lease streams and (leases on) the entries of their
  // not-clear sets with targets after `after` ("": from the first), at
  // most `max_entries` of them in target order (lease_status.h).
  // Read-only: takes each stream's lock for one pass over its copy of the
  // set; never calls anyone.
  LeaseStatus lease_status(absl::string_view after, size_t max_entries) const;

  const std::shared_ptr<prometheus::Registry>& metrics_registry() const;
  const engine::Clock& clock() const;
  const ClientOptions& options() const;

 private:
  class Impl;
  explicit CoordinatorClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_COORDINATOR_CLIENT_H_
