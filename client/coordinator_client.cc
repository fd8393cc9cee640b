#include "client/coordinator_client.h"

#include <algorithm>
#include <climits>
#include <thread>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/client_metrics.h"
#include "client/members.h"
#include "client/replica.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "prometheus/registry.h"
#include "proto/wire/rendezvous.h"
#include "proto/wire/wire.h"
#include "server/engine/engine.h"

namespace stagger::client {
namespace {

constexpr absl::string_view kConsideredDown =
    "coordinator considered down (recheck interval not over); not called";
// How often each of several replicas' health is asked (Replica).
constexpr absl::Duration kHealthInterval = absl::Milliseconds(250);

bool IsSuccess(engine::Outcome o) { return o == engine::Outcome::kSuccess; }

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options,
                                           const std::string& target) {
  grpc::ChannelArguments args;
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

}  // namespace

const char* CallName(Call c) { return c == Call::kAdmit ? "admit" : "report"; }

const char* DecisionSourceName(DecisionSource s) {
  return s == DecisionSource::kCoordinator ? "coordinator" : "local";
}

// ---------------------------------------------------------------------------
// The implementation behind the public header.

class CoordinatorClient::Impl {
 public:
  explicit Impl(ClientOptions options);
  ~Impl();

  absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in);
  absl::StatusOr<ClientDecision> Report(const ReportRequest& in);
  absl::StatusOr<std::vector<ClientDecision>> AdmitBatch(
      absl::Span<const AdmitRequest> items);
  absl::StatusOr<std::vector<ClientDecision>> ReportBatch(
      absl::Span<const ReportRequest> items);
  bool WaitForCoordinator(absl::Duration timeout);
  bool coordinator_up() const;
  std::vector<ReplicaId> replicas() const;
  ReplicaId OwnerOf(absl::string_view key) const;

  const ClientOptions options_;
  const engine::Clock* const clock_;
  engine::RandomSource* const random_;
  const std::shared_ptr<prometheus::Registry> registry_;

 private:
  // The replicas as of one membership: `replicas[i]` is named
  // ring->names()[i]. Immutable; calls hold the one they started with.
  struct View {
    std::optional<wire::Rendezvous> ring;  // none while there are no members
    std::vector<std::shared_ptr<Replica>> replicas;
  };
  std::shared_ptr<const View> view() const;
  // A view of `members`, keeping the replicas (and channels) of `old` whose
  // name and target are unchanged.
  std::shared_ptr<const View> MakeView(const std::vector<Member>& members,
                                       const View* old);
  // Whether a call may go to replica i now: `serving_only` skips draining
  // replicas; otherwise Replica::TryUse (which may claim its probe).
  using Usable = std::function<bool(size_t i, bool serving_only)>;
  // The replica a call about `key` goes to: the first in the key's
  // rendezvous order that is usable, preferring serving ones; size() for
  // none (decide locally).
  static size_t Pick(const View& v, absl::string_view key,
                     const Usable& usable);
  std::shared_ptr<Replica> Route(absl::string_view key);
  // The gauge: 1 while any replica takes calls.
  void UpdateUpGauge();
  // Background upkeep (real time): the local engine's idle endpoints are
  // evicted as staggerd evicts its own, every idle_eviction / 10 within
  // [1s, 60s]; a dns:/// target is re-resolved every dns_refresh (every
  // second while it has no members).
  void Housekeeping();
  // The members of the dns:/// target now (options_.resolve_members or
  // ResolveDnsMembers), sorted by name, one per name.
  absl::StatusOr<std::vector<Member>> ResolveMembers() const;
  void RefreshDns();

  // Deadline of one RPC.
  void PrepareContext(grpc::ClientContext* ctx) const;
  // Handles a non-OK RPC status: InvalidArgument -> returned as error;
  // anything else -> replica marked down, and `cause` set (returns OK).
  absl::Status ClassifyRpcError(Replica* r, const grpc::Status& s,
                                absl::Status* cause);
  // Wire decision -> ClientDecision; INTERNAL if unusable.
  absl::StatusOr<ClientDecision> FromWire(const v1::Decision& d,
                                          absl::Time now) const;
  ClientDecision FromEngine(const engine::Decision& d, absl::Time now,
                            DecisionSource source, absl::Status cause) const;
  // FAIL_CLOSED answer.
  ClientDecision ClosedDefer(int attempt, absl::Status cause);

  absl::StatusOr<ClientDecision> LocalAdmit(const AdmitRequest& in,
                                            absl::Status cause);
  absl::StatusOr<ClientDecision> LocalReport(const ReportRequest& in,
                                             absl::Status cause);

  // The shape every call shares. If `r` is non-null: fill(&req), call `rpc`
  // on it, convert(resp). A usable answer marks it up and is returned;
  // INVALID_ARGUMENT is returned as the error; any other RPC error, or an
  // unusable answer (INTERNAL), marks it down and becomes the fallback
  // cause. Otherwise (or then) returns local(cause).
  template <typename Result, typename Req, typename Resp, typename Fill,
            typename Convert, typename Local>
  absl::StatusOr<Result> CallOrFallback(
      const std::shared_ptr<Replica>& r,
      grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                      const Req&, Resp*),
      Fill fill, Convert convert, Local local);
  template <typename Resp>
  absl::StatusOr<ClientDecision> FromResponse(const Resp& resp) const;
  template <typename Resp>
  absl::StatusOr<std::vector<ClientDecision>> FromBatchResponse(
      const Resp& resp, size_t n) const;
  // The server's batch checks (wire::CheckBatchSize, then validate() on
  // every item, an error prefixed "items[i]."), on the local engine.
  template <typename In>
  absl::Status ValidateBatch(
      absl::Span<const In> items,
      absl::Status (engine::Engine::*validate)(const In&) const) const;
  // A batch, split by the replica each key routes to (see the header). A
  // batch that all goes to one place is sent whole, so the server checks
  // it; otherwise the server's checks run here first (a bad item fails the
  // whole batch before any part is sent), every part is sent at once with
  // send(stub, ctx, req, resp, done) and the answers are put back in
  // order. A part whose replica fails is decided locally.
  template <typename Req, typename Resp, typename In, typename Send>
  absl::StatusOr<std::vector<ClientDecision>> Batch(
      absl::Span<const In> items,
      grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                      const Req&, Resp*),
      Send send, absl::Status (engine::Engine::*validate)(const In&) const,
      absl::StatusOr<ClientDecision> (Impl::*decide)(const In&, absl::Status));
  // Batch fallback: ValidateBatch, then decide()s each item with `cause`.
  template <typename In>
  absl::StatusOr<std::vector<ClientDecision>> LocalBatch(
      absl::Span<const In> items,
      absl::Status (engine::Engine::*validate)(const In&) const,
      absl::StatusOr<ClientDecision> (Impl::*decide)(const In&, absl::Status),
      const absl::Status& cause);

  std::unique_ptr<ClientMetrics> metrics_;
  std::unique_ptr<engine::Engine> local_;
  MemberSpec spec_;
  mutable absl::Mutex view_mu_;
  std::shared_ptr<const View> view_ ABSL_GUARDED_BY(view_mu_);
  absl::Notification stop_;
  std::thread housekeeper_;
};

CoordinatorClient::Impl::Impl(ClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock
                                       : engine::RealClock::Instance()),
      random_(options_.random != nullptr ? options_.random
                                         : engine::PerThreadRandom::Instance()),
      registry_(options_.registry != nullptr
                    ? options_.registry
                    : std::make_shared<prometheus::Registry>()) {
  metrics_ = std::make_unique<ClientMetrics>(*registry_);
  local_ = std::make_unique<engine::Engine>(options_.local_policy, clock_,
                                            random_);
  std::vector<Member> members;
  if (options_.channel != nullptr) {
    members.push_back({"channel", "channel"});
  } else {
    spec_ = *ParseMembers(options_.target);  // checked by Create
    members = spec_.members;
    if (!spec_.dns_host.empty()) {
      absl::StatusOr<std::vector<Member>> found = ResolveMembers();
      if (found.ok()) members = *std::move(found);
    }
  }
  std::shared_ptr<const View> first = MakeView(members, nullptr);
  {
    absl::MutexLock l(&view_mu_);
    view_ = std::move(first);
  }
  housekeeper_ = std::thread([this] { Housekeeping(); });
}

CoordinatorClient::Impl::~Impl() {
  stop_.Notify();
  housekeeper_.join();
  std::shared_ptr<const View> last;
  {
    absl::MutexLock l(&view_mu_);
    last.swap(view_);
  }
  last.reset();  // the replicas' watchers stop before the metrics go
}

std::shared_ptr<const CoordinatorClient::Impl::View>
CoordinatorClient::Impl::view() const {
  absl::MutexLock l(&view_mu_);
  return view_;
}

std::shared_ptr<const CoordinatorClient::Impl::View>
CoordinatorClient::Impl::MakeView(const std::vector<Member>& members,
                                  const View* old) {
  auto v = std::make_shared<View>();
  std::vector<std::string> names;
  for (const Member& m : members) {
    names.push_back(m.name);
    std::shared_ptr<Replica> kept;
    for (size_t i = 0; old != nullptr && i < old->replicas.size(); ++i) {
      const Replica& r = *old->replicas[i];
      if (r.name() == m.name && r.target() == m.target) kept = old->replicas[i];
    }
    if (kept == nullptr) {
      Replica::Options o;
      o.recheck_interval = options_.recheck_interval;
      // Health checks pick among several replicas; one has no alternative.
      o.health_interval = members.size() > 1 || !spec_.dns_host.empty()
                              ? kHealthInterval
                              : absl::ZeroDuration();
      o.clock = clock_;
      o.metrics = metrics_.get();
      o.on_change = [this] { UpdateUpGauge(); };
      kept = std::make_shared<Replica>(
          m.name, m.target,
          options_.channel != nullptr ? options_.channel
                                      : MakeChannel(options_, m.target),
          std::move(o));
    }
    v->replicas.push_back(std::move(kept));
  }
  if (!names.empty()) v->ring = *wire::Rendezvous::Create(std::move(names));
  return v;
}

void CoordinatorClient::Impl::Housekeeping() {
  const absl::Duration evict_every =
      engine::EvictionPeriod(options_.local_policy.limits.idle_eviction);
  absl::Time next_eviction = absl::Now() + evict_every;
  absl::Time next_dns = absl::Now() + options_.dns_refresh;
  while (!stop_.WaitForNotificationWithTimeout(
      std::min(next_eviction, next_dns) - absl::Now())) {
    if (absl::Now() >= next_eviction) {
      local_->EvictIdle();
      next_eviction = absl::Now() + evict_every;
    }
    if (absl::Now() >= next_dns) {
      if (!spec_.dns_host.empty()) RefreshDns();
      next_dns = absl::Now() + (view()->replicas.empty()
                                    ? absl::Seconds(1)
                                    : options_.dns_refresh);
    }
  }
}

absl::StatusOr<std::vector<Member>> CoordinatorClient::Impl::ResolveMembers()
    const {
  absl::StatusOr<std::vector<Member>> found =
      options_.resolve_members
          ? options_.resolve_members(spec_.dns_host, spec_.dns_port)
          : ResolveDnsMembers(spec_.dns_host, spec_.dns_port);
  if (!found.ok()) return found;
  if (found->empty()) {
    return absl::UnavailableError(absl::StrCat(
        "dns:///", spec_.dns_host, ":", spec_.dns_port, ": no members"));
  }
  return SortedByName(*std::move(found));
}

void CoordinatorClient::Impl::RefreshDns() {
  absl::StatusOr<std::vector<Member>> found = ResolveMembers();
  if (!found.ok()) return;  // keep the members last seen
  std::shared_ptr<const View> old = view();
  bool same = found->size() == old->replicas.size();
  for (size_t i = 0; same && i < found->size(); ++i) {
    same = (*found)[i].name == old->replicas[i]->name() &&
           (*found)[i].target == old->replicas[i]->target();
  }
  if (same) return;
  std::shared_ptr<const View> next = MakeView(*found, old.get());
  absl::MutexLock l(&view_mu_);
  view_ = std::move(next);
}

size_t CoordinatorClient::Impl::Pick(const View& v, absl::string_view key,
                                     const Usable& usable) {
  if (v.replicas.size() == 1) return usable(0, false) ? 0 : 1;
  if (v.replicas.empty()) return 0;
  const std::vector<size_t> rank = v.ring->Rank(key);
  for (bool serving_only : {true, false}) {
    for (size_t i : rank) {
      if (usable(i, serving_only)) return i;
    }
  }
  return v.replicas.size();
}

std::shared_ptr<Replica> CoordinatorClient::Impl::Route(absl::string_view key) {
  std::shared_ptr<const View> v = view();
  const size_t i = Pick(*v, key, [&](size_t r, bool serving_only) {
    const Replica& rep = *v->replicas[r];
    if (serving_only && !rep.serving()) return false;
    return v->replicas[r]->TryUse();
  });
  return i < v->replicas.size() ? v->replicas[i] : nullptr;
}

void CoordinatorClient::Impl::UpdateUpGauge() {
  metrics_->SetCoordinatorUp(coordinator_up());
}

bool CoordinatorClient::Impl::coordinator_up() const {
  std::shared_ptr<const View> v = view();
  if (v == nullptr) return false;  // under construction
  for (const auto& r : v->replicas) {
    if (r->up()) return true;
  }
  return false;
}

std::vector<CoordinatorClient::ReplicaId> CoordinatorClient::Impl::replicas()
    const {
  std::vector<ReplicaId> out;
  for (const auto& r : view()->replicas) out.push_back({r->name(), r->target()});
  return out;
}

CoordinatorClient::ReplicaId CoordinatorClient::Impl::OwnerOf(
    absl::string_view key) const {
  std::shared_ptr<const View> v = view();
  if (v->replicas.empty()) return {};
  const Replica& r = *v->replicas[v->ring->Owner(key)];
  return {r.name(), r.target()};
}

bool CoordinatorClient::Impl::WaitForCoordinator(absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  bool all = true;
  std::shared_ptr<const View> v = view();
  for (const auto& r : v->replicas) {
    all = r->WaitForConnected(std::max(absl::ZeroDuration(),
                                       until - absl::Now())) && all;
  }
  return all;
}

void CoordinatorClient::Impl::PrepareContext(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.call_deadline));
  ctx->set_wait_for_ready(false);  // fail fast while disconnected
}

absl::Status CoordinatorClient::Impl::ClassifyRpcError(Replica* r,
                                                       const grpc::Status& s,
                                                       absl::Status* cause) {
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    r->MarkUp();  // the coordinator answered: it is up, the request is bad
    return absl::InvalidArgumentError(s.error_message());
  }
  r->MarkDown(s.error_code());
  *cause = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("coordinator: ", s.error_message()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Decision conversion.

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::FromWire(
    const v1::Decision& d, absl::Time now) const {
  absl::StatusOr<engine::Decision> e = wire::FromProto(d, now);
  if (!e.ok()) return e.status();
  return FromEngine(*e, now, DecisionSource::kCoordinator, absl::OkStatus());
}

ClientDecision CoordinatorClient::Impl::FromEngine(const engine::Decision& d,
                                                   absl::Time now,
                                                   DecisionSource source,
                                                   absl::Status cause) const {
  ClientDecision out;
  out.verdict = d.verdict;
  out.reason = d.reason;
  out.delay = d.delay;
  out.attempt = d.attempt;
  if (d.verdict == engine::Verdict::kDefer) {
    out.defer_until = d.defer_until;
    out.defer_for = std::max(absl::ZeroDuration(), d.defer_until - now);
  }
  out.source = source;
  out.fallback_cause = std::move(cause);
  return out;
}

ClientDecision CoordinatorClient::Impl::ClosedDefer(int attempt,
                                                    absl::Status cause) {
  const absl::Time now = clock_->Now();
  const absl::Duration r = options_.recheck_interval;
  ClientDecision out;
  out.verdict = engine::Verdict::kDefer;
  out.reason = engine::Reason::kCircuitOpen;
  out.attempt = attempt;
  // Spread over [r, 1.5 r) so parked deliveries do not return together.
  out.defer_for =
      r + absl::Nanoseconds(absl::Uniform<int64_t>(
              random_->Get(), 0,
              std::max<int64_t>(1, absl::ToInt64Nanoseconds(r / 2))));
  out.defer_until = now + out.defer_for;
  out.source = DecisionSource::kLocalFallback;
  out.fallback_cause = std::move(cause);
  return out;
}

// ---------------------------------------------------------------------------
// Local decisions.

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::LocalAdmit(
    const AdmitRequest& in, absl::Status cause) {
  ClientDecision out;
  if (options_.fallback == FallbackMode::kFailClosed) {
    if (absl::Status v = local_->ValidateAdmit(in); !v.ok()) return v;
    out = ClosedDefer(in.attempt, std::move(cause));
  } else {
    absl::StatusOr<engine::Decision> d = local_->Admit(in);
    if (!d.ok()) return d.status();
    out = FromEngine(*d, clock_->Now(), DecisionSource::kLocalFallback,
                     std::move(cause));
  }
  metrics_->CountFallback(Call::kAdmit, out.verdict);
  return out;
}

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::LocalReport(
    const ReportRequest& in, absl::Status cause) {
  ClientDecision out;
  if (options_.fallback == FallbackMode::kFailClosed) {
    if (absl::Status v = local_->ValidateReport(in); !v.ok()) return v;
    // Fail-closed only refuses to *send* without the coordinator. Answers
    // that send nothing need no coordination: a success is done, a
    // non-retryable outcome gives up; any other failure defers the next
    // attempt (no attempt consumed) until the coordinator can be asked.
    if (IsSuccess(in.outcome) ||
        in.outcome == engine::Outcome::kNotRetryable) {
      engine::Decision d;
      d.verdict = IsSuccess(in.outcome) ? engine::Verdict::kDone
                                        : engine::Verdict::kGiveUp;
      d.reason = IsSuccess(in.outcome) ? engine::Reason::kSucceeded
                                       : engine::Reason::kNotRetryable;
      d.attempt = IsSuccess(in.outcome) ? in.attempt : in.attempt + 1;
      out = FromEngine(d, clock_->Now(), DecisionSource::kLocalFallback,
                       std::move(cause));
    } else {
      out = ClosedDefer(in.attempt + 1, std::move(cause));
    }
  } else {
    absl::StatusOr<engine::Decision> d = local_->Report(in);
    if (!d.ok()) return d.status();
    out = FromEngine(*d, clock_->Now(), DecisionSource::kLocalFallback,
                     std::move(cause));
  }
  metrics_->CountFallback(Call::kReport, out.verdict);
  return out;
}

// ---------------------------------------------------------------------------
// The calls.

template <typename Result, typename Req, typename Resp, typename Fill,
          typename Convert, typename Local>
absl::StatusOr<Result> CoordinatorClient::Impl::CallOrFallback(
    const std::shared_ptr<Replica>& r,
    grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                    const Req&, Resp*),
    Fill fill, Convert convert, Local local) {
  absl::Status cause = absl::UnavailableError(kConsideredDown);
  if (r != nullptr) {
    Req req;
    fill(&req);
    Resp resp;
    grpc::ClientContext ctx;
    PrepareContext(&ctx);
    const grpc::Status s = (r->stub()->*rpc)(&ctx, req, &resp);
    if (s.ok()) {
      absl::StatusOr<Result> d = convert(resp);
      if (d.ok()) {
        r->MarkUp();
        return d;
      }
      r->MarkDown(grpc::StatusCode::INTERNAL);
      cause = d.status();
    } else if (absl::Status err = ClassifyRpcError(r.get(), s, &cause);
               !err.ok()) {
      return err;
    }
  }
  return local(std::move(cause));
}

template <typename Resp>
absl::StatusOr<ClientDecision> CoordinatorClient::Impl::FromResponse(
    const Resp& resp) const {
  return resp.has_decision()
             ? FromWire(resp.decision(), clock_->Now())
             : absl::InternalError("coordinator answered no decision");
}

template <typename Resp>
absl::StatusOr<std::vector<ClientDecision>>
CoordinatorClient::Impl::FromBatchResponse(const Resp& resp, size_t n) const {
  const absl::Time now = clock_->Now();
  if (static_cast<size_t>(resp.decisions_size()) != n) {
    return absl::InternalError("coordinator answered a batch of the "
                               "wrong size");
  }
  std::vector<ClientDecision> out;
  out.reserve(n);
  for (int i = 0; i < resp.decisions_size(); ++i) {
    absl::StatusOr<ClientDecision> d = FromWire(resp.decisions(i), now);
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

template <typename In>
absl::Status CoordinatorClient::Impl::ValidateBatch(
    absl::Span<const In> items,
    absl::Status (engine::Engine::*validate)(const In&) const) const {
  if (absl::Status s =
          wire::CheckBatchSize(items.size(), local_->max_batch_size());
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = (local_.get()->*validate)(items[i]); !s.ok()) {
      return wire::PrefixItem(s, i);
    }
  }
  return absl::OkStatus();
}

template <typename In>
absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::Impl::LocalBatch(
    absl::Span<const In> items,
    absl::Status (engine::Engine::*validate)(const In&) const,
    absl::StatusOr<ClientDecision> (Impl::*decide)(const In&, absl::Status),
    const absl::Status& cause) {
  // Validate everything first so that a bad item changes nothing.
  if (absl::Status s = ValidateBatch(items, validate); !s.ok()) return s;
  std::vector<ClientDecision> out;
  out.reserve(items.size());
  for (const In& in : items) {
    absl::StatusOr<ClientDecision> d = (this->*decide)(in, cause);
    if (!d.ok()) return d.status();  // validated above: not expected
    out.push_back(*std::move(d));
  }
  return out;
}

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::Admit(
    const AdmitRequest& in) {
  return CallOrFallback<ClientDecision>(
      Route(in.endpoint), &v1::RetryCoordinator::Stub::Admit,
      [&](v1::AdmitRequest* req) { wire::ToProto(in, req); },
      [&](const v1::AdmitResponse& resp) { return FromResponse(resp); },
      [&](absl::Status cause) { return LocalAdmit(in, std::move(cause)); });
}

absl::StatusOr<ClientDecision> CoordinatorClient::Impl::Report(
    const ReportRequest& in) {
  return CallOrFallback<ClientDecision>(
      Route(in.endpoint), &v1::RetryCoordinator::Stub::Report,
      [&](v1::ReportRequest* req) { wire::ToProto(in, req); },
      [&](const v1::ReportResponse& resp) { return FromResponse(resp); },
      [&](absl::Status cause) { return LocalReport(in, std::move(cause)); });
}

template <typename Req, typename Resp, typename In, typename Send>
absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::Impl::Batch(
    absl::Span<const In> items,
    grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                    const Req&, Resp*),
    Send send, absl::Status (engine::Engine::*validate)(const In&) const,
    absl::StatusOr<ClientDecision> (Impl::*decide)(const In&, absl::Status)) {
  const std::shared_ptr<const View> v = view();
  const size_t n = v->replicas.size();
  std::vector<int> tried(n, -1);  // each replica's TryUse, asked once
  const Usable usable = [&](size_t r, bool serving_only) {
    if (serving_only && !v->replicas[r]->serving()) return false;
    if (tried[r] < 0) tried[r] = v->replicas[r]->TryUse() ? 1 : 0;
    return tried[r] == 1;
  };
  std::vector<size_t> owner(items.size(), n);
  for (size_t i = 0; i < items.size(); ++i) {
    owner[i] = Pick(*v, items[i].endpoint, usable);
  }
  const auto local = [&](absl::Span<const In> part, absl::Status cause) {
    return LocalBatch(part, validate, decide, cause);
  };
  if (items.empty() ||
      std::all_of(owner.begin(), owner.end(),
                  [&](size_t o) { return o == owner.front(); })) {
    return CallOrFallback<std::vector<ClientDecision>>(
        items.empty() || owner.front() == n ? nullptr
                                            : v->replicas[owner.front()],
        rpc,
        [&](Req* req) {
          for (const In& in : items) wire::ToProto(in, req->add_items());
        },
        [&](const Resp& resp) { return FromBatchResponse(resp, items.size()); },
        [&](absl::Status cause) { return local(items, std::move(cause)); });
  }
  if (absl::Status s = ValidateBatch(items, validate); !s.ok()) return s;

  // One part per replica, all in flight together.
  struct Part {
    std::vector<size_t> index;  // into items
    std::vector<In> inputs;
    Req req;
    Resp resp;
    grpc::ClientContext ctx;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Part>> parts(n + 1);  // [n]: decided locally
  for (size_t i = 0; i < items.size(); ++i) {
    if (parts[owner[i]] == nullptr) parts[owner[i]] = std::make_unique<Part>();
    parts[owner[i]]->index.push_back(i);
    parts[owner[i]]->inputs.push_back(items[i]);
  }
  absl::Mutex mu;
  int pending = 0;
  for (size_t r = 0; r < n; ++r) {
    if (parts[r] == nullptr) continue;
    Part& p = *parts[r];
    for (const In& in : p.inputs) wire::ToProto(in, p.req.add_items());
    PrepareContext(&p.ctx);
    {
      absl::MutexLock l(&mu);
      ++pending;
    }
    send(v->replicas[r]->stub(), &p.ctx, &p.req, &p.resp,
         [&mu, &pending, &p](grpc::Status s) {
           absl::MutexLock l(&mu);
           p.status = std::move(s);
           --pending;
         });
  }
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](int* left) { return *left == 0; }, &pending));
  }

  std::vector<ClientDecision> out(items.size());
  for (size_t r = 0; r <= n; ++r) {
    if (parts[r] == nullptr) continue;
    Part& p = *parts[r];
    absl::Status cause = absl::UnavailableError(kConsideredDown);
    absl::StatusOr<std::vector<ClientDecision>> got = cause;
    if (r < n) {
      Replica* rep = v->replicas[r].get();
      if (p.status.ok()) {
        got = FromBatchResponse(p.resp, p.inputs.size());
        if (got.ok()) {
          rep->MarkUp();
        } else {
          rep->MarkDown(grpc::StatusCode::INTERNAL);
          cause = got.status();
        }
      } else if (absl::Status err = ClassifyRpcError(rep, p.status, &cause);
                 !err.ok()) {
        return err;  // checked here already: the replicas' limits differ
      }
    }
    if (!got.ok()) got = local(p.inputs, cause);
    if (!got.ok()) return got.status();
    for (size_t j = 0; j < p.index.size(); ++j) {
      out[p.index[j]] = std::move((*got)[j]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::Impl::AdmitBatch(
    absl::Span<const AdmitRequest> items) {
  return Batch(items, &v1::RetryCoordinator::Stub::AdmitBatch,
               [](v1::RetryCoordinator::Stub* stub, grpc::ClientContext* ctx,
                  const v1::AdmitBatchRequest* req,
                  v1::AdmitBatchResponse* resp,
                  std::function<void(grpc::Status)> done) {
                 stub->async()->AdmitBatch(ctx, req, resp, std::move(done));
               },
               &engine::Engine::ValidateAdmit, &Impl::LocalAdmit);
}

absl::StatusOr<std::vector<ClientDecision>>
CoordinatorClient::Impl::ReportBatch(absl::Span<const ReportRequest> items) {
  return Batch(items, &v1::RetryCoordinator::Stub::ReportBatch,
               [](v1::RetryCoordinator::Stub* stub, grpc::ClientContext* ctx,
                  const v1::ReportBatchRequest* req,
                  v1::ReportBatchResponse* resp,
                  std::function<void(grpc::Status)> done) {
                 stub->async()->ReportBatch(ctx, req, resp, std::move(done));
               },
               &engine::Engine::ValidateReport, &Impl::LocalReport);
}

// ---------------------------------------------------------------------------
// The public face.

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Create(
    ClientOptions options) {
  std::vector<std::string> errors;
  if (options.channel == nullptr) {
    if (absl::StatusOr<MemberSpec> m = ParseMembers(options.target); !m.ok()) {
      errors.emplace_back(m.status().message());
    }
  }
  if (options.dns_refresh <= absl::ZeroDuration() ||
      options.dns_refresh > absl::Hours(1)) {
    errors.push_back(absl::StrCat("dns_refresh: must be in (0, 1h], is ",
                                  absl::FormatDuration(options.dns_refresh)));
  }
  if (options.call_deadline <= absl::ZeroDuration() ||
      options.call_deadline > absl::Minutes(1)) {
    errors.push_back(absl::StrCat("call_deadline: must be in (0, 1m], is ",
                                  absl::FormatDuration(options.call_deadline)));
  }
  if (options.recheck_interval <= absl::ZeroDuration() ||
      options.recheck_interval > absl::Hours(1)) {
    errors.push_back(
        absl::StrCat("recheck_interval: must be in (0, 1h], is ",
                     absl::FormatDuration(options.recheck_interval)));
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
const std::shared_ptr<prometheus::Registry>&
CoordinatorClient::metrics_registry() const {
  return impl_->registry_;
}
const engine::Clock& CoordinatorClient::clock() const { return *impl_->clock_; }
const ClientOptions& CoordinatorClient::options() const {
  return impl_->options_;
}

}  // namespace stagger::client
