#include "client/coordinator_client.h"

#include <algorithm>
#include <climits>
#include <thread>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "client/client_metrics.h"
#include "client/replica.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "prometheus/registry.h"
#include "proto/wire/wire.h"
#include "server/engine/engine.h"

namespace stagger::client {
namespace {

constexpr absl::string_view kConsideredDown =
    "coordinator considered down (recheck interval not over); not called";

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

  const ClientOptions options_;
  const engine::Clock* const clock_;
  engine::RandomSource* const random_;
  const std::shared_ptr<prometheus::Registry> registry_;

 private:
  // The replica a call about `key` goes to now, or null: decide locally.
  Replica* Route(absl::string_view key);
  // The gauge: 1 while any replica takes calls.
  void UpdateUpGauge();
  // The local engine's idle endpoints are evicted as staggerd evicts its
  // own: every idle_eviction / 10, within [1s, 60s] (real time).
  void EvictLoop();

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
      Replica* r,
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
  // Batch fallback: ValidateBatch, then decide()s each item with `cause`.
  template <typename In>
  absl::StatusOr<std::vector<ClientDecision>> LocalBatch(
      absl::Span<const In> items,
      absl::Status (engine::Engine::*validate)(const In&) const,
      absl::StatusOr<ClientDecision> (Impl::*decide)(const In&, absl::Status),
      const absl::Status& cause);

  std::unique_ptr<ClientMetrics> metrics_;
  std::unique_ptr<engine::Engine> local_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  absl::Notification stop_;
  std::thread evictor_;
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
  std::shared_ptr<grpc::Channel> channel =
      options_.channel != nullptr ? options_.channel
                                  : MakeChannel(options_, options_.target);
  replicas_.push_back(std::make_unique<Replica>(
      options_.target, std::move(channel), options_.recheck_interval, clock_,
      metrics_.get(), [this] { UpdateUpGauge(); }));
  evictor_ = std::thread([this] { EvictLoop(); });
}

CoordinatorClient::Impl::~Impl() {
  stop_.Notify();
  evictor_.join();
}

void CoordinatorClient::Impl::EvictLoop() {
  const absl::Duration every =
      std::clamp(options_.local_policy.limits.idle_eviction / 10,
                 absl::Seconds(1), absl::Seconds(60));
  while (!stop_.WaitForNotificationWithTimeout(every)) local_->EvictIdle();
}

Replica* CoordinatorClient::Impl::Route(absl::string_view /*key*/) {
  Replica* r = replicas_.front().get();
  return r->TryUse() ? r : nullptr;
}

void CoordinatorClient::Impl::UpdateUpGauge() {
  bool any = false;
  for (const auto& r : replicas_) any = any || r->up();
  metrics_->SetCoordinatorUp(any);
}

bool CoordinatorClient::Impl::coordinator_up() const {
  for (const auto& r : replicas_) {
    if (r->up()) return true;
  }
  return false;
}

bool CoordinatorClient::Impl::WaitForCoordinator(absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  bool all = true;
  for (const auto& r : replicas_) {
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
    Replica* r,
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
    } else if (absl::Status err = ClassifyRpcError(r, s, &cause); !err.ok()) {
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

absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::Impl::AdmitBatch(
    absl::Span<const AdmitRequest> items) {
  return CallOrFallback<std::vector<ClientDecision>>(
      Route(items.empty() ? absl::string_view() : items.front().endpoint),
      &v1::RetryCoordinator::Stub::AdmitBatch,
      [&](v1::AdmitBatchRequest* req) {
        for (const AdmitRequest& in : items) wire::ToProto(in, req->add_items());
      },
      [&](const v1::AdmitBatchResponse& resp) {
        return FromBatchResponse(resp, items.size());
      },
      [&](absl::Status cause) {
        return LocalBatch(items, &engine::Engine::ValidateAdmit,
                          &Impl::LocalAdmit, cause);
      });
}

absl::StatusOr<std::vector<ClientDecision>>
CoordinatorClient::Impl::ReportBatch(absl::Span<const ReportRequest> items) {
  return CallOrFallback<std::vector<ClientDecision>>(
      Route(items.empty() ? absl::string_view() : items.front().endpoint),
      &v1::RetryCoordinator::Stub::ReportBatch,
      [&](v1::ReportBatchRequest* req) {
        for (const ReportRequest& in : items) {
          wire::ToProto(in, req->add_items());
        }
      },
      [&](const v1::ReportBatchResponse& resp) {
        return FromBatchResponse(resp, items.size());
      },
      [&](absl::Status cause) {
        return LocalBatch(items, &engine::Engine::ValidateReport,
                          &Impl::LocalReport, cause);
      });
}

// ---------------------------------------------------------------------------
// The public face.

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Create(
    ClientOptions options) {
  std::vector<std::string> errors;
  if (options.channel == nullptr && options.target.empty()) {
    errors.push_back("target: must not be empty (or set channel)");
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
const std::shared_ptr<prometheus::Registry>&
CoordinatorClient::metrics_registry() const {
  return impl_->registry_;
}
const engine::Clock& CoordinatorClient::clock() const { return *impl_->clock_; }
const ClientOptions& CoordinatorClient::options() const {
  return impl_->options_;
}

}  // namespace stagger::client
