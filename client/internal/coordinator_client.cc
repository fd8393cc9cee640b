// CoordinatorClient (client/coordinator_client.h): the facade. The jobs are
// their own units:
//   membership.h     the replicas, DNS refresh, routing a key to its owner
//   replica_call.h   one RPC to one replica, and what its failure means
//   local_decider.h  the answers when no replica can take a call
//   batch_fan_out.h  a batch split by owner, sent at once, put back in order
//   replica.h        one replica's channel, health and up/down state
//   sync_session.h   with leases: one replica's lease stream and the book of
//                    what may be answered here
// This file wires them and validates ClientOptions.
#include "client/coordinator_client.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/internal/batch_fan_out.h"
#include "client/internal/client_metrics.h"
#include "client/internal/held_book.h"
#include "client/internal/local_decider.h"
#include "client/internal/membership.h"
#include "client/internal/replica.h"
#include "client/internal/replica_call.h"
#include "client/internal/target_parser.h"
#include "core/engine/engine.h"
#include "core/lease/agent_link.h"
#include "core/wire/wire.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "prometheus/registry.h"

namespace stagger::client {
namespace {

// How often each of several replicas' health is asked (Replica).
constexpr absl::Duration kHealthInterval = absl::Milliseconds(250);

// A connection attempt (TCP and TLS) gets this long before the next one
// (gRPC's default is 20 s): a replica back after a partition is reconnected
// to within about this long.
constexpr absl::Duration kConnectTimeout = absl::Seconds(2);

// `own_connection`: a connection of its own (for waiting calls: they must
// not take the HTTP/2 streams the other calls need), not shared with the
// other channels to the same target. `lease_stream`: the channel carries
// a lease stream, kept alive (CoordinatorClient::kKeepaliveTime).
std::shared_ptr<grpc::Channel> MakeReplicaChannel(const ClientOptions& options,
                                                  const std::string& target,
                                                  bool own_connection = false,
                                                  bool lease_stream = false) {
  grpc::ChannelArguments args;
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (lease_stream) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                static_cast<int>(absl::ToInt64Milliseconds(
                    CoordinatorClient::kKeepaliveTime)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(absl::ToInt64Milliseconds(
                    CoordinatorClient::kKeepaliveTimeout)));
    // Pings go on while a partition keeps this side's data from leaving.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(kConnectTimeout)));
  }
  // Reconnect at least every recheck interval, so a probe after the
  // interval finds a fresh connection attempt rather than a channel still
  // in its exponential reconnect backoff (default: up to 120 s).
  const int64_t recheck_ms = std::clamp<int64_t>(
      absl::ToInt64Milliseconds(options.recheck_interval), 100, INT_MAX);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::min<int64_t>(recheck_ms, 1000)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(recheck_ms));
  // The client's deadline and fallback are the retry policy; gRPC's own
  // retries would only spend the deadline.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // TLS (client/tls_options.h): every replica's channel uses the same
  // credentials and expects the same name in its certificate, if set.
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(
      target,
      options.credentials != nullptr ? options.credentials
                                     : grpc::InsecureChannelCredentials(),
      args);
}

const char* ScopeName(lease::Scope s) {
  switch (s) {
    case lease::Scope::kEndpoint: return "endpoint";
    case lease::Scope::kPrefix: return "prefix";
    case lease::Scope::kMember: return "member";
  }
  return "?";
}

// The lease stream's options: who this client is (a new incarnation per
// client) and how often it sends its counts.
SyncSession::Options LeaseOptions(const ClientOptions& options,
                                  const engine::Clock* clock) {
  SyncSession::Options o;
  o.agent_id = options.lease_holder_id;
  if (o.agent_id.empty()) {
    char host[256] = {};
    o.agent_id = gethostname(host, sizeof(host) - 1) == 0 && host[0] != 0
                     ? host
                     : "stagger-client";
  }
  absl::BitGen gen;
  o.incarnation = absl::Uniform<uint64_t>(absl::IntervalClosed, gen, 1,
                                          UINT64_MAX);
  o.flush_interval = options.lease_flush_interval;
  o.max_backoff = options.recheck_interval;
  o.clock = clock;
  return o;
}

// ClientOptions::target as members; a given channel is one member.
MemberSpec SpecOf(const ClientOptions& options) {
  if (options.channel != nullptr) return {{{"channel", "channel"}}, "", ""};
  return *ParseMembers(options.target);  // checked by Create
}

}  // namespace

const char* CallName(Call c) { return c == Call::kAdmit ? "admit" : "report"; }

const char* DecisionSourceName(DecisionSource s) {
  switch (s) {
    case DecisionSource::kCoordinator: return "coordinator";
    case DecisionSource::kLocalFallback: return "local";
    case DecisionSource::kLease: return "lease";
  }
  return "unknown";
}

// Calls in flight: CancelAllAndWait() cancels each and returns when gRPC
// has destroyed the last one's state. A Token counts one call from its
// construction to its destruction; its context can be cancelled from the
// construction until Forget() (call it before the context is destroyed).
class InFlightCalls {
 public:
  class Token {
   public:
    Token(InFlightCalls* calls, grpc::ClientContext* ctx)
        : calls_(calls), ctx_(ctx) {
      absl::MutexLock l(&calls_->mu_);
      ++calls_->n_;
      calls_->contexts_.insert(ctx_);
    }
    void Forget() {
      absl::MutexLock l(&calls_->mu_);
      calls_->contexts_.erase(ctx_);
    }
    ~Token() {
      absl::MutexLock l(&calls_->mu_);
      calls_->contexts_.erase(ctx_);
      --calls_->n_;
    }
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    InFlightCalls* const calls_;
    grpc::ClientContext* const ctx_;
  };

  void CancelAllAndWait() {
    absl::MutexLock l(&mu_);
    for (grpc::ClientContext* ctx : contexts_) ctx->TryCancel();
    const auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return n_ == 0;
    };
    mu_.Await(absl::Condition(&none));
  }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
};

class CoordinatorClient::Impl {
 public:
  explicit Impl(ClientOptions options);
  ~Impl();

  absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in);
  absl::StatusOr<ClientDecision> Report(const ReportRequest& in);
  void AdmitWaitingAsync(const AdmitRequest& in, const Canceller* cancel,
                         AdmitDone done, absl::Time answer_by);
  // AdmitWaitingAsync's two ways: held over the replica's lease stream
  // (false: the stream is not up, `done` untouched), or a waiting call.
  bool HoldOnStream(Replica* r, const AdmitRequest& in,
                    const Canceller* cancel, absl::Time answer_by,
                    AdmitDone& done);
  void AnswerHeld(const std::shared_ptr<struct StreamHeldAdmit>& call,
                  Replica* r, const Canceller* cancel,
                  absl::StatusOr<v1::AdmitResponse> resp);
  // A held call's stream ended without its answer: the rest of its wait as
  // a waiting call to the key's owner now (or the fallback's answer).
  void ResendHeld(const std::shared_ptr<struct StreamHeldAdmit>& call,
                  const Canceller* cancel, AdmitDone done);
  void AdmitWaitingByCall(const std::shared_ptr<Replica>& r,
                          const AdmitRequest& in, const Canceller* cancel,
                          absl::Time answer_by, AdmitDone done);
  std::optional<ClientDecision> AdmitUnderLease(const AdmitRequest& in) {
    return LeasedAdmit(in);
  }
  std::optional<ClientDecision> ReportUnderLease(const ReportRequest& in) {
    if (in.outcome != engine::Outcome::kSuccess) return std::nullopt;
    return LeasedReport(in);
  }
  absl::StatusOr<std::vector<ClientDecision>> AdmitBatch(
      absl::Span<const AdmitRequest> items);
  absl::StatusOr<std::vector<ClientDecision>> ReportBatch(
      absl::Span<const ReportRequest> items);
  bool WaitForCoordinator(absl::Duration timeout);
  bool coordinator_up() const { return membership_->AnyUp(); }
  std::vector<ReplicaId> replicas() const;
  ReplicaId OwnerOf(absl::string_view key) const;
  LeaseStatus lease_status(absl::string_view after, size_t max_entries) const;

  const ClientOptions options_;
  const engine::Clock* const clock_;
  engine::RandomSource* const random_;
  const std::shared_ptr<prometheus::Registry> registry_;

 private:
  std::shared_ptr<Replica> MakeReplica(const Member& m, bool health_checks);
  // The lease stream of `key`'s owner if it may answer `key` locally now
  // (lease::MayAnswerLocally over the view's streams), or null.
  SyncSession* LocalSession(const Membership::View& v,
                            absl::string_view key) const;
  // Under the lease of the key's owner: the local answer, or nullopt (ask
  // the coordinator). Checks the request first (a bad one is the
  // coordinator's to name). A failure report first sends the owner the
  // key's counts and waits for them (at most call_deadline).
  std::optional<ClientDecision> LeasedAdmit(const AdmitRequest& in);
  std::optional<ClientDecision> LeasedReport(const ReportRequest& in);
  // The lease streams' state into the metrics (every second).
  void SampleLeases();
  // Background upkeep (real time): the local engine's idle endpoints are
  // evicted as staggerd evicts its own, every engine::EvictionPeriod; a
  // dns:/// target is re-resolved every dns_refresh (every second while
  // it has no members).
  void Housekeeping();

  ClientMetrics metrics_;
  LocalDecider local_;
  std::unique_ptr<Membership> membership_;
  absl::Notification stop_;
  std::thread housekeeper_;
  // Waiting Admits whose callback state (context, channel reference) gRPC
  // has not destroyed yet: the destructor cancels them and waits for none,
  // so that no callback runs on a destroyed client and no channel outlives
  // it on one of gRPC's threads.
  InFlightCalls in_flight_;
};

CoordinatorClient::Impl::Impl(ClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock
                                       : engine::RealClock::Instance()),
      random_(options_.random != nullptr ? options_.random
                                         : engine::PerThreadRandom::Instance()),
      registry_(options_.registry != nullptr
                    ? options_.registry
                    : std::make_shared<prometheus::Registry>()),
      metrics_(*registry_),
      local_(options_, clock_, random_, &metrics_) {
  membership_ = std::make_unique<Membership>(
      SpecOf(options_), options_.resolve_members,
      [this](const Member& m, bool health_checks) {
        return MakeReplica(m, health_checks);
      });
  if (options_.leases) {
    // The fallback keeps to the last not-clear set of each key's owner.
    local_.set_covering([this](absl::string_view key)
                            -> std::optional<lease::NotClearEntry> {
      const std::shared_ptr<const Membership::View> v = membership_->view();
      if (!v->ring.has_value()) return std::nullopt;
      SyncSession* s = v->replicas[v->ring->Owner(key)]->sync();
      if (s == nullptr) return std::nullopt;
      return s->Covering(key);
    });
  }
  housekeeper_ = std::thread([this] { Housekeeping(); });
}

CoordinatorClient::Impl::~Impl() {
  stop_.Notify();
  housekeeper_.join();
  in_flight_.CancelAllAndWait();
  membership_.reset();  // the replicas' watchers stop before the metrics go
}

std::shared_ptr<Replica> CoordinatorClient::Impl::MakeReplica(
    const Member& m, bool health_checks) {
  Replica::Options o;
  o.recheck_interval = options_.recheck_interval;
  o.health_interval = health_checks ? kHealthInterval : absl::ZeroDuration();
  o.clock = clock_;
  o.metrics = &metrics_;
  o.on_change = [this] { metrics_.SetCoordinatorUp(coordinator_up()); };
  if (options_.leases) {
    o.sync = LeaseOptions(options_, options_.clock != nullptr
                                        ? clock_
                                        : engine::MonotonicClock::Instance());
  }
  if (options_.channel == nullptr) {
    o.waiting_channel = MakeReplicaChannel(options_, m.target, true);
  }
  return std::make_shared<Replica>(
      m.name, m.target,
      options_.channel != nullptr
          ? options_.channel
          : MakeReplicaChannel(options_, m.target, /*own_connection=*/false,
                               /*lease_stream=*/options_.leases),
      std::move(o));
}

void CoordinatorClient::Impl::Housekeeping() {
  const absl::Duration evict_every =
      engine::EvictionPeriod(options_.local_policy.limits.idle_eviction);
  absl::Time next_eviction = absl::Now() + evict_every;
  absl::Time next_dns = absl::Now() + options_.dns_refresh;
  const absl::Duration sample_every =
      options_.leases ? absl::Seconds(1) : absl::InfiniteDuration();
  absl::Time next_sample = absl::Now() + sample_every;
  while (!stop_.WaitForNotificationWithTimeout(
      std::min({next_eviction, next_dns, next_sample}) - absl::Now())) {
    if (absl::Now() >= next_sample) {
      SampleLeases();
      next_sample = absl::Now() + sample_every;
    }
    if (absl::Now() >= next_eviction) {
      local_.EvictIdle();
      next_eviction = absl::Now() + evict_every;
    }
    if (absl::Now() >= next_dns) {
      membership_->Refresh();
      next_dns = absl::Now() + (membership_->view()->replicas.empty()
                                    ? absl::Seconds(1)
                                    : options_.dns_refresh);
    }
  }
}

std::vector<CoordinatorClient::ReplicaId> CoordinatorClient::Impl::replicas()
    const {
  std::vector<ReplicaId> out;
  for (const auto& r : membership_->view()->replicas) {
    out.push_back({r->name(), r->target()});
  }
  return out;
}

CoordinatorClient::ReplicaId CoordinatorClient::Impl::OwnerOf(
    absl::string_view key) const {
  std::shared_ptr<const Membership::View> v = membership_->view();
  if (v->replicas.empty()) return {};
  const Replica& r = *v->replicas[v->ring->Owner(key)];
  return {r.name(), r.target()};
}

bool CoordinatorClient::Impl::WaitForCoordinator(absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  bool all = true;
  for (const auto& r : membership_->view()->replicas) {
    all = r->WaitForConnected(std::max(absl::ZeroDuration(),
                                       until - absl::Now())) && all;
  }
  return all;
}

LeaseStatus CoordinatorClient::Impl::lease_status(absl::string_view after,
                                                 size_t max_entries) const {
  LeaseStatus out;
  for (const auto& r : membership_->view()->replicas) {
    ReplicaStatus rs{r->name(), r->target(), r->up(), r->serving()};
    if (const SyncSession* s = r->sync(); s != nullptr) {
      if (out.holder_id.empty()) out.holder_id = s->options().agent_id;
      const lease::AgentLink::Status st = s->status();
      rs.stream = true;
      rs.stream_connected = s->connected();
      rs.incarnation = s->options().incarnation;
      rs.leased = st.leased;
      rs.lease_left = st.leased ? st.lease_until - s->Now()
                                : absl::ZeroDuration();
      rs.in_sync = st.in_sync;
      rs.set_version = st.version;
      rs.not_clear = st.entries;
      rs.refusal = st.refusal;
      rs.flushes = s->flushes();
      rs.reconnects = s->reconnects();
      rs.held_calls = s->held();
      lease::AgentLink::EntryPage page = s->ListEntries(after, max_entries);
      out.not_clear_matched += page.matched;
      for (const lease::NotClearEntry& e : page.entries) {
        out.not_clear.push_back(
            {e.key.target, ScopeName(e.key.scope), lease::WhyName(e.why),
             r->name(), e.until});
      }
    }
    out.replicas.push_back(std::move(rs));
  }
  // Each replica's page is in target order; together, the first
  // max_entries of their union.
  std::sort(out.not_clear.begin(), out.not_clear.end(),
            [](const NotClearEntry& a, const NotClearEntry& b) {
              return std::tie(a.target, a.replica) <
                     std::tie(b.target, b.replica);
            });
  if (out.not_clear.size() > max_entries) out.not_clear.resize(max_entries);
  return out;
}

void CoordinatorClient::Impl::SampleLeases() {
  int64_t leased = 0, up = 0, flushes = 0, reconnects = 0;
  for (const auto& r : membership_->view()->replicas) {
    SyncSession* s = r->sync();
    if (s == nullptr) continue;
    leased += s->status().leased ? 1 : 0;
    up += s->connected() ? 1 : 0;
    flushes += s->flushes();
    reconnects += s->reconnects();
  }
  metrics_.SetLeaseState(leased, up, flushes, reconnects);
}

SyncSession* CoordinatorClient::Impl::LocalSession(
    const Membership::View& v, absl::string_view key) const {
  if (!options_.leases || !v.ring.has_value()) return nullptr;
  absl::InlinedVector<const lease::LinkView*, 4> links;
  for (const auto& r : v.replicas) links.push_back(r->sync());
  const size_t owner = v.ring->Owner(key);
  SyncSession* s = v.replicas[owner]->sync();
  if (s == nullptr ||
      !lease::MayAnswerLocally(links, v.ring->names(), owner, key, s->Now())) {
    return nullptr;
  }
  return s;
}

std::optional<ClientDecision> CoordinatorClient::Impl::LeasedAdmit(
    const AdmitRequest& in) {
  if (!options_.leases || in.attempt != 1 || !local_.ValidateAdmit(in).ok()) {
    return std::nullopt;
  }
  const std::shared_ptr<const Membership::View> v = membership_->view();
  SyncSession* s = LocalSession(*v, in.endpoint);
  if (s == nullptr) return std::nullopt;
  std::optional<engine::Decision> d = s->Admit(in, random_->Get());
  if (!d.has_value()) return std::nullopt;
  metrics_.CountLeaseDecision(Call::kAdmit, d->verdict);
  return ToClientDecision(*d, clock_->Now(), DecisionSource::kLease,
                          absl::OkStatus());
}

std::optional<ClientDecision> CoordinatorClient::Impl::LeasedReport(
    const ReportRequest& in) {
  if (!options_.leases || !local_.ValidateReport(in).ok()) return std::nullopt;
  const std::shared_ptr<const Membership::View> v = membership_->view();
  if (!v->ring.has_value()) return std::nullopt;
  if (in.outcome != engine::Outcome::kSuccess) {
    // The owner learns this endpoint's successes before its failure.
    SyncSession* owner = v->replicas[v->ring->Owner(in.endpoint)]->sync();
    if (owner != nullptr) owner->FlushFor(in.endpoint, options_.call_deadline);
    return std::nullopt;
  }
  SyncSession* s = LocalSession(*v, in.endpoint);
  if (s == nullptr) return std::nullopt;
  std::optional<engine::Decision> d = s->Report(in);
  if (!d.has_value()) return std::nullopt;
  metrics_.CountLeaseDecision(Call::kReport, d->verdict);
  return ToClientDecision(*d, clock_->Now(), DecisionSource::kLease,
                          absl::OkStatus());
}

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::Admit(
    const AdmitRequest& in) {
  if (std::optional<ClientDecision> d = LeasedAdmit(in)) return *d;
  std::shared_ptr<Replica> r = membership_->Route(in.endpoint);
  return CallOrFallback<ClientDecision>(
      r, options_.call_deadline,
      &v1::RetryCoordinator::Stub::Admit,
      [&](v1::AdmitRequest* req) { wire::ToProto(in, req); },
      [&](const v1::AdmitResponse& resp) {
        return FromResponse(resp, clock_->Now());
      },
      [&](absl::Status cause) { return local_.Admit(in, std::move(cause)); });
}

// One waiting call in flight: its request (the input borrows its endpoint),
// response, context, replica and the caller's cancellation.
struct WaitingAdmitCall {
  explicit WaitingAdmitCall(InFlightCalls* calls) : in_flight(calls, &ctx) {}
  ~WaitingAdmitCall() { in_flight.Forget(); }  // ctx is still alive here
  InFlightCalls::Token in_flight;  // destroyed last: after ctx
  v1::AdmitRequest req;
  v1::AdmitResponse resp;
  grpc::ClientContext ctx;
  std::shared_ptr<Replica> replica;
  CoordinatorClient::AdmitDone done;
  Canceller::Subscription cancel;  // destroyed first: before ctx
};

void CoordinatorClient::Impl::AdmitWaitingAsync(const AdmitRequest& in,
                                                const Canceller* cancel,
                                                AdmitDone done,
                                                absl::Time answer_by) {
  if (std::optional<ClientDecision> d = LeasedAdmit(in)) return done(*d);
  std::shared_ptr<Replica> r = membership_->Route(in.endpoint);
  if (r == nullptr) {
    return done(local_.Admit(in, absl::UnavailableError(kConsideredDown)));
  }
  if (r->sync() != nullptr &&
      HoldOnStream(r.get(), in, cancel, answer_by, done)) {
    return;
  }
  AdmitWaitingByCall(r, in, cancel, answer_by, std::move(done));
}

// A held call over the replica's lease stream (sync_session.h): its
// request, when it started, its bound, the caller's `done` and
// cancellation. `finished` stops a subscription made after the answer
// came.
struct StreamHeldAdmit {
  v1::AdmitRequest req;
  absl::Time started;
  absl::Time answer_by;
  absl::Mutex mu;
  bool finished ABSL_GUARDED_BY(mu) = false;
  CoordinatorClient::AdmitDone done ABSL_GUARDED_BY(mu);
  Canceller::Subscription cancel ABSL_GUARDED_BY(mu);
};

bool CoordinatorClient::Impl::HoldOnStream(Replica* r, const AdmitRequest& in,
                                           const Canceller* cancel,
                                           absl::Time answer_by,
                                           AdmitDone& done) {
  auto call = std::make_shared<StreamHeldAdmit>();
  wire::ToProto(in, &call->req);
  call->started = absl::Now();
  call->answer_by = answer_by;
  {
    absl::MutexLock l(&call->mu);
    call->done = std::move(done);
  }
  SyncSession* s = r->sync();
  std::optional<uint64_t> id = s->Hold(
      call->req, answer_by,
      [this, call, r, cancel](absl::StatusOr<v1::AdmitResponse> resp) {
        AnswerHeld(call, r, cancel, std::move(resp));
      });
  absl::MutexLock l(&call->mu);
  if (!id.has_value()) {  // the stream is not up: the caller sends it
    done = std::move(call->done);
    return false;
  }
  if (cancel != nullptr && !call->finished) {
    call->cancel = cancel->OnCancel([s, id] { s->Drop(*id); });
  }
  return true;
}

void CoordinatorClient::Impl::AnswerHeld(
    const std::shared_ptr<StreamHeldAdmit>& call, Replica* r,
    const Canceller* cancel, absl::StatusOr<v1::AdmitResponse> resp) {
  Canceller::Subscription sub;
  AdmitDone done;
  {
    absl::MutexLock l(&call->mu);
    call->finished = true;
    sub = std::move(call->cancel);
    done = std::move(call->done);
  }
  sub.Reset();
  switch (NextStep(resp)) {
    case HeldNext::kFollow: {
      absl::StatusOr<ClientDecision> d = FromResponse(*resp, clock_->Now());
      if (d.ok()) r->MarkUp();
      return done(d);
    }
    case HeldNext::kFallback: {
      // No answer by its give-up time (the stream is stuck, or the replica
      // silent): the fallback decides now.
      r->MarkDown(grpc::StatusCode::DEADLINE_EXCEEDED);
      absl::StatusOr<engine::AdmitInput> in = wire::FromProto(call->req);
      return done(in.ok() ? local_.Admit(*in, resp.status()) : in.status());
    }
    case HeldNext::kResend:
      if (stop_.HasBeenNotified()) {
        return done(absl::CancelledError("the client is closing"));
      }
      return ResendHeld(call, cancel, std::move(done));
    case HeldNext::kFail:
      return done(resp.status());
  }
  return done(resp.status());
}

// The stream broke, or its replica left the members (the session ended):
// the call is not cancelled, it goes on elsewhere. This is where a
// replaced replica's held calls are re-routed.
void CoordinatorClient::Impl::ResendHeld(
    const std::shared_ptr<StreamHeldAdmit>& call, const Canceller* cancel,
    AdmitDone done) {
  absl::StatusOr<engine::AdmitInput> in = wire::FromProto(call->req);
  if (!in.ok()) return done(in.status());
  // Its bound stays: the wait it began with plus the grace, or answer_by.
  const absl::Time answer_by = std::min(
      call->answer_by, call->started + in->wait + SyncSession::kHeldGrace);
  in->wait = std::max(in->wait - (absl::Now() - call->started),
                      absl::Milliseconds(1));
  std::shared_ptr<Replica> again = membership_->Route(in->endpoint);
  if (again == nullptr) {
    return done(local_.Admit(*in, absl::UnavailableError(kConsideredDown)));
  }
  AdmitWaitingByCall(again, *in, cancel, answer_by, std::move(done));
}

void CoordinatorClient::Impl::AdmitWaitingByCall(
    const std::shared_ptr<Replica>& r, const AdmitRequest& in,
    const Canceller* cancel, absl::Time answer_by, AdmitDone done) {
  auto call = std::make_shared<WaitingAdmitCall>(&in_flight_);
  wire::ToProto(in, &call->req);
  call->replica = r;
  call->done = std::move(done);
  // The replica answers by the deadline less 100 ms; a deadline that passes
  // first is the fallback's turn (ClassifyRpcError).
  PrepareContext(&call->ctx,
                 std::min(in.wait + kWaitMargin, answer_by - absl::Now()));
  if (cancel != nullptr) {
    grpc::ClientContext* ctx = &call->ctx;
    call->cancel = cancel->OnCancel([ctx] { ctx->TryCancel(); });
  }
  r->waiting_stub()->async()->Admit(
      &call->ctx, &call->req, &call->resp,
      [this, call, cancel](grpc::Status s) {
        call->cancel.Reset();
        AdmitDone done = std::move(call->done);
        if (s.ok()) {
          absl::StatusOr<ClientDecision> d = FromResponse(call->resp, clock_->Now());
          if (d.ok()) call->replica->MarkUp();
          return done(d);
        }
        if (cancel != nullptr && cancel->cancelled()) {
          return done(absl::CancelledError("cancelled while waiting"));
        }
        absl::Status cause;
        if (absl::Status err = ClassifyRpcError(call->replica.get(), s, &cause);
            !err.ok()) {
          return done(err);
        }
        absl::StatusOr<engine::AdmitInput> in = wire::FromProto(call->req);
        done(in.ok() ? local_.Admit(*in, cause) : in.status());
      });
}

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::Report(
    const ReportRequest& in) {
  if (std::optional<ClientDecision> d = LeasedReport(in)) return *d;
  std::shared_ptr<Replica> r = membership_->Route(in.endpoint);
  return CallOrFallback<ClientDecision>(
      r, options_.call_deadline,
      &v1::RetryCoordinator::Stub::Report,
      [&](v1::ReportRequest* req) { wire::ToProto(in, req); },
      [&](const v1::ReportResponse& resp) {
        return FromResponse(resp, clock_->Now());
      },
      [&](absl::Status cause) { return local_.Report(in, std::move(cause)); });
}

absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::Impl::AdmitBatch(
    absl::Span<const AdmitRequest> items) {
  using Stub = v1::RetryCoordinator::Stub;
  BatchCall<v1::AdmitBatchRequest, v1::AdmitBatchResponse> call{
      &Stub::AdmitBatch,
      [](Stub* stub, grpc::ClientContext* ctx, const v1::AdmitBatchRequest* req,
         v1::AdmitBatchResponse* resp, std::function<void(grpc::Status)> done) {
        stub->async()->AdmitBatch(ctx, req, resp, std::move(done));
      },
      options_.call_deadline, clock_};
  return FanOutBatch(*membership_->view(), items, call, local_,
                     [&](absl::Span<const AdmitRequest> part,
                         const absl::Status& cause) {
                       return local_.AdmitBatch(part, cause);
                     });
}

absl::StatusOr<std::vector<ClientDecision>>
CoordinatorClient::Impl::ReportBatch(absl::Span<const ReportRequest> items) {
  using Stub = v1::RetryCoordinator::Stub;
  BatchCall<v1::ReportBatchRequest, v1::ReportBatchResponse> call{
      &Stub::ReportBatch,
      [](Stub* stub, grpc::ClientContext* ctx,
         const v1::ReportBatchRequest* req, v1::ReportBatchResponse* resp,
         std::function<void(grpc::Status)> done) {
        stub->async()->ReportBatch(ctx, req, resp, std::move(done));
      },
      options_.call_deadline, clock_};
  return FanOutBatch(*membership_->view(), items, call, local_,
                     [&](absl::Span<const ReportRequest> part,
                         const absl::Status& cause) {
                       return local_.ReportBatch(part, cause);
                     });
}

// ---------------------------------------------------------------------------
// Options and the public face.

namespace {

// Every problem with `options`, one line each with its field path.
std::vector<std::string> OptionErrors(const ClientOptions& options) {
  std::vector<std::string> errors;
  if (options.channel == nullptr) {
    if (absl::StatusOr<MemberSpec> m = ParseMembers(options.target); !m.ok()) {
      errors.emplace_back(m.status().message());
    }
  }
  const auto in_range = [&](absl::string_view name, absl::Duration d,
                            absl::Duration max, absl::string_view max_text) {
    if (d <= absl::ZeroDuration() || d > max) {
      errors.push_back(absl::StrCat(name, ": must be in (0, ", max_text,
                                    "], is ", absl::FormatDuration(d)));
    }
  };
  in_range("dns_refresh", options.dns_refresh, absl::Hours(1), "1h");
  in_range("call_deadline", options.call_deadline, absl::Minutes(1), "1m");
  in_range("recheck_interval", options.recheck_interval, absl::Hours(1), "1h");
  in_range("lease_flush_interval", options.lease_flush_interval,
           absl::Seconds(1), "1s");
  if (options.lease_holder_id.size() > 256) {
    errors.push_back(absl::StrCat("lease_holder_id: must be at most 256 "
                                  "bytes, is ",
                                  options.lease_holder_id.size()));
  }
  if (options.fallback != FallbackMode::kFailOpen &&
      options.fallback != FallbackMode::kFailClosed) {
    errors.push_back("fallback: must be FAIL_OPEN or FAIL_CLOSED");
  }
  absl::Status policy = engine::ValidateEngineConfig(options.local_policy);
  if (!policy.ok()) {
    // One error per line, each with its field path; prefix the option name.
    for (absl::string_view line :
         absl::StrSplit(policy.message(), '\n', absl::SkipEmpty())) {
      errors.push_back(absl::StrCat("local_policy.", line));
    }
  }
  return errors;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Create(
    ClientOptions options) {
  const std::vector<std::string> errors = OptionErrors(options);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return std::unique_ptr<CoordinatorClient>(
      new CoordinatorClient(std::make_unique<Impl>(std::move(options))));
}

CoordinatorClient::CoordinatorClient(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CoordinatorClient::~CoordinatorClient() = default;

absl::StatusOr<ClientDecision> CoordinatorClient::Admit(
    const AdmitRequest& in) {
  return impl_->Admit(in);
}
absl::StatusOr<ClientDecision> CoordinatorClient::Report(
    const ReportRequest& in) {
  return impl_->Report(in);
}
void CoordinatorClient::AdmitWaitingAsync(const AdmitRequest& in,
                                          const Canceller* cancel,
                                          AdmitDone done,
                                          absl::Time answer_by) {
  impl_->AdmitWaitingAsync(in, cancel, std::move(done), answer_by);
}
absl::StatusOr<ClientDecision> CoordinatorClient::AdmitWaiting(
    const AdmitRequest& in, const Canceller* cancel) {
  if (in.wait <= absl::ZeroDuration()) return Admit(in);
  absl::Notification answered;
  absl::StatusOr<ClientDecision> out;
  AdmitWaitingAsync(in, cancel, [&](absl::StatusOr<ClientDecision> d) {
    out = std::move(d);
    answered.Notify();
  });
  answered.WaitForNotification();
  return out;
}
std::optional<ClientDecision> CoordinatorClient::AdmitUnderLease(
    const AdmitRequest& in) {
  return impl_->AdmitUnderLease(in);
}
std::optional<ClientDecision> CoordinatorClient::ReportUnderLease(
    const ReportRequest& in) {
  return impl_->ReportUnderLease(in);
}
absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::AdmitBatch(
    absl::Span<const AdmitRequest> items) {
  return impl_->AdmitBatch(items);
}
absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::ReportBatch(
    absl::Span<const ReportRequest> items) {
  return impl_->ReportBatch(items);
}
bool CoordinatorClient::WaitForCoordinator(absl::Duration timeout) {
  return impl_->WaitForCoordinator(timeout);
}
bool CoordinatorClient::coordinator_up() const {
  return impl_->coordinator_up();
}
std::vector<CoordinatorClient::ReplicaId> CoordinatorClient::replicas() const {
  return impl_->replicas();
}
CoordinatorClient::ReplicaId CoordinatorClient::OwnerOf(
    absl::string_view key) const {
  return impl_->OwnerOf(key);
}
LeaseStatus CoordinatorClient::lease_status(absl::string_view after,
                                            size_t max_entries) const {
  return impl_->lease_status(after, max_entries);
}
const std::shared_ptr<prometheus::Registry>&
CoordinatorClient::metrics_registry() const {
  return impl_->registry_;
}
const engine::Clock& CoordinatorClient::clock() const { return *impl_->clock_; }
const ClientOptions& CoordinatorClient::options() const {
  return impl_->options_;
}

}  // namespace stagger::client
