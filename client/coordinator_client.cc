#include "client/coordinator_client.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace stagger::client {
namespace {

constexpr absl::string_view kConsideredDown =
    "coordinator considered down (recheck interval not over); not called";

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* ts) {
  const int64_t seconds = absl::ToUnixSeconds(t);  // floor
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  absl::Duration rem;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &rem);
  out->set_seconds(seconds);  // seconds and nanos share the sign of d
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rem)));
}

absl::Duration FromDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

void FillAdmit(const engine::AdmitInput& in, v1::AdmitRequest* req) {
  req->set_endpoint(std::string(in.endpoint));
  req->set_attempt(in.attempt);
  if (in.deadline != absl::InfiniteFuture()) {
    SetTimestamp(in.deadline, req->mutable_deadline());
  }
  if (in.first_attempt_time != absl::InfinitePast()) {
    SetTimestamp(in.first_attempt_time, req->mutable_first_attempt_time());
  }
}

void FillReport(const engine::ReportInput& in, v1::ReportRequest* req) {
  req->set_endpoint(std::string(in.endpoint));
  req->set_attempt(in.attempt);
  // engine::Outcome values equal stagger.v1.Outcome's; an out-of-range
  // value is passed through for the server to refuse.
  req->set_outcome(static_cast<v1::Outcome>(static_cast<int>(in.outcome)));
  if (in.retry_after.has_value()) {
    SetDuration(*in.retry_after, req->mutable_retry_after());
  }
  if (in.deadline != absl::InfiniteFuture()) {
    SetTimestamp(in.deadline, req->mutable_deadline());
  }
  if (in.first_attempt_time != absl::InfinitePast()) {
    SetTimestamp(in.first_attempt_time, req->mutable_first_attempt_time());
  }
}

bool IsSuccess(engine::Outcome o) { return o == engine::Outcome::kSuccess; }

}  // namespace

const char* DecisionSourceName(DecisionSource s) {
  return s == DecisionSource::kCoordinator ? "coordinator" : "local";
}

// ---------------------------------------------------------------------------
// Coordinator conveniences.

absl::StatusOr<ClientDecision> Coordinator::Admit(absl::string_view endpoint,
                                                  int attempt,
                                                  absl::Time deadline,
                                                  absl::Time first_attempt_time) {
  engine::AdmitInput in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  in.deadline = deadline;
  in.first_attempt_time = first_attempt_time;
  return Admit(in);
}

absl::StatusOr<ClientDecision> Coordinator::Report(
    absl::string_view endpoint, int attempt, engine::Outcome outcome,
    std::optional<absl::Duration> retry_after, absl::Time deadline,
    absl::Time first_attempt_time) {
  engine::ReportInput in;
  in.endpoint = endpoint;
  in.attempt = attempt;
  in.outcome = outcome;
  in.retry_after = retry_after;
  in.deadline = deadline;
  in.first_attempt_time = first_attempt_time;
  return Report(in);
}

// ---------------------------------------------------------------------------
// Construction.

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
      new CoordinatorClient(std::move(options)));
}

CoordinatorClient::CoordinatorClient(ClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock
                                       : engine::RealClock::Instance()),
      random_(options_.random != nullptr ? options_.random
                                         : engine::PerThreadRandom::Instance()),
      registry_(options_.registry != nullptr
                    ? options_.registry
                    : std::make_shared<prometheus::Registry>()) {
  metrics_ = std::make_unique<ClientMetrics>(*registry_);
  channel_ = options_.channel;
  if (channel_ == nullptr) {
    grpc::ChannelArguments args;
    // Reconnect at least every recheck interval, so a probe after the
    // interval finds a fresh connection attempt rather than a channel still
    // in its exponential reconnect backoff (default: up to 120 s).
    const int64_t recheck_ms = std::clamp<int64_t>(
        absl::ToInt64Milliseconds(options_.recheck_interval), 100, INT_MAX);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(std::min<int64_t>(recheck_ms, 1000)));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(recheck_ms));
    // The client's deadline and fallback are the retry policy; gRPC's own
    // retries would only spend the deadline.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    if (!options_.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options_.tls_server_name);
    }
    channel_ = grpc::CreateCustomChannel(
        options_.target,
        options_.credentials != nullptr ? options_.credentials
                                        : grpc::InsecureChannelCredentials(),
        args);
  }
  channel_->GetState(/*try_to_connect=*/true);  // connect before first call
  stub_ = v1::RetryCoordinator::NewStub(channel_);
  local_ = std::make_unique<engine::Engine>(options_.local_policy, clock_,
                                            random_);
  watcher_ = std::thread([this] { WatchChannel(); });
}

CoordinatorClient::~CoordinatorClient() {
  stop_watching_.Notify();
  watcher_.join();  // at most one watch period
}

void CoordinatorClient::WatchChannel() {
  // Period of one watch: bounds how long the destructor waits.
  constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);
  // The local engine's idle endpoints are evicted as staggerd evicts its
  // own: every idle_eviction / 10, within [1s, 60s] (real time).
  const absl::Duration evict_every =
      std::clamp(options_.local_policy.limits.idle_eviction / 10,
                 absl::Seconds(1), absl::Seconds(60));
  absl::Time next_eviction = absl::Now() + evict_every;
  grpc_connectivity_state last = channel_->GetState(/*try_to_connect=*/true);
  while (!stop_watching_.HasBeenNotified()) {
    if (absl::Now() >= next_eviction) {
      local_->EvictIdle();
      next_eviction = absl::Now() + evict_every;
    }
    // Returns on a state change or after the period; while it waits, this
    // thread polls the channel's connections.
    channel_->WaitForStateChange(last,
                                 absl::ToChronoTime(absl::Now() + kWatchPeriod));
    const grpc_connectivity_state now =
        channel_->GetState(/*try_to_connect=*/true);
    if (now == GRPC_CHANNEL_READY && last != GRPC_CHANNEL_READY) {
      OnChannelReady();
    }
    last = now;
  }
}

void CoordinatorClient::OnChannelReady() {
  absl::MutexLock l(&mu_);
  if (!up_) next_probe_ = absl::InfinitePast();
}

// ---------------------------------------------------------------------------
// Coordinator health.

bool CoordinatorClient::ShouldCallCoordinator() {
  absl::MutexLock l(&mu_);
  if (up_) return true;
  const absl::Time now = clock_->Now();
  if (now < next_probe_) return false;
  // This call is the probe; others keep deciding locally until it answers
  // (or for another interval if it fails).
  next_probe_ = now + options_.recheck_interval;
  return true;
}

void CoordinatorClient::MarkUp() {
  absl::MutexLock l(&mu_);
  if (up_) return;
  up_ = true;
  metrics_->SetCoordinatorUp(true);
}

void CoordinatorClient::MarkDown(grpc::StatusCode code) {
  absl::MutexLock l(&mu_);
  up_ = false;
  next_probe_ = clock_->Now() + options_.recheck_interval;
  metrics_->CountCoordinatorError(code);
  metrics_->SetCoordinatorUp(false);
}

bool CoordinatorClient::coordinator_up() const {
  absl::MutexLock l(&mu_);
  return up_;
}

bool CoordinatorClient::WaitForCoordinator(absl::Duration timeout) {
  return channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
}

void CoordinatorClient::PrepareContext(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.call_deadline));
  ctx->set_wait_for_ready(false);  // fail fast while disconnected
}

absl::Status CoordinatorClient::ClassifyRpcError(const grpc::Status& s,
                                                 absl::Status* cause) {
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    MarkUp();  // the coordinator answered: it is up, the request is bad
    return absl::InvalidArgumentError(s.error_message());
  }
  MarkDown(s.error_code());
  *cause = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("coordinator: ", s.error_message()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Decision conversion.

absl::StatusOr<ClientDecision> CoordinatorClient::FromProto(
    const v1::Decision& d, absl::Time now) const {
  ClientDecision out;
  if (d.verdict() < v1::PROCEED || d.verdict() > v1::DONE) {
    return absl::InternalError(
        absl::StrCat("coordinator answered an unusable verdict ",
                     static_cast<int>(d.verdict())));
  }
  out.verdict = static_cast<engine::Verdict>(d.verdict());
  out.reason = static_cast<engine::Reason>(d.reason());
  out.attempt = d.attempt();
  if (out.verdict == engine::Verdict::kProceed && d.has_delay()) {
    out.delay = std::max(absl::ZeroDuration(), FromDuration(d.delay()));
  }
  if (out.verdict == engine::Verdict::kDefer) {
    if (d.has_defer_for()) {
      out.defer_for = std::max(absl::ZeroDuration(), FromDuration(d.defer_for()));
      out.defer_until = now + out.defer_for;
    } else if (d.has_defer_until()) {
      out.defer_until = FromTimestamp(d.defer_until());
      out.defer_for = std::max(absl::ZeroDuration(), out.defer_until - now);
    } else {
      return absl::InternalError("coordinator answered DEFER without a time");
    }
  }
  out.source = DecisionSource::kCoordinator;
  return out;
}

ClientDecision CoordinatorClient::FromEngine(const engine::Decision& d,
                                             absl::Time now,
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
  out.source = DecisionSource::kLocalFallback;
  out.fallback_cause = std::move(cause);
  return out;
}

ClientDecision CoordinatorClient::ClosedDefer(int attempt, absl::Status cause) {
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

absl::StatusOr<ClientDecision> CoordinatorClient::LocalAdmit(
    const engine::AdmitInput& in, absl::Status cause) {
  ClientDecision out;
  if (options_.fallback == FallbackMode::kFailClosed) {
    if (absl::Status v = local_->ValidateAdmit(in); !v.ok()) return v;
    out = ClosedDefer(in.attempt, std::move(cause));
  } else {
    absl::StatusOr<engine::Decision> d = local_->Admit(in);
    if (!d.ok()) return d.status();
    out = FromEngine(*d, clock_->Now(), std::move(cause));
  }
  metrics_->CountFallback(Call::kAdmit, out.verdict);
  return out;
}

absl::StatusOr<ClientDecision> CoordinatorClient::LocalReport(
    const engine::ReportInput& in, absl::Status cause) {
  ClientDecision out;
  if (options_.fallback == FallbackMode::kFailClosed) {
    if (absl::Status v = local_->ValidateReport(in); !v.ok()) return v;
    // Fail-closed only refuses to *send* without the coordinator. Answers
    // that send nothing need no coordination: a success is done, a
    // non-retryable outcome gives up; any other failure defers the next
    // attempt (no attempt consumed) until the coordinator can be asked.
    if (IsSuccess(in.outcome)) {
      out.verdict = engine::Verdict::kDone;
      out.reason = engine::Reason::kSucceeded;
      out.attempt = in.attempt;
      out.source = DecisionSource::kLocalFallback;
      out.fallback_cause = std::move(cause);
    } else if (in.outcome == engine::Outcome::kNotRetryable) {
      out.verdict = engine::Verdict::kGiveUp;
      out.reason = engine::Reason::kNotRetryable;
      out.attempt = in.attempt + 1;
      out.source = DecisionSource::kLocalFallback;
      out.fallback_cause = std::move(cause);
    } else {
      out = ClosedDefer(in.attempt + 1, std::move(cause));
    }
  } else {
    absl::StatusOr<engine::Decision> d = local_->Report(in);
    if (!d.ok()) return d.status();
    out = FromEngine(*d, clock_->Now(), std::move(cause));
  }
  metrics_->CountFallback(Call::kReport, out.verdict);
  return out;
}

// ---------------------------------------------------------------------------
// The calls.

namespace {

absl::Status CheckBatchSize(size_t n, int max) {
  if (n == 0 || n > static_cast<size_t>(max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("items: must have 1..", max, " items, has ", n));
  }
  return absl::OkStatus();
}

absl::Status ItemError(size_t i, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("items[", i, "].", s.message()));
}

}  // namespace

template <typename Result, typename Req, typename Resp, typename Fill,
          typename Convert, typename Local>
absl::StatusOr<Result> CoordinatorClient::CallOrFallback(
    grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                    const Req&, Resp*),
    Fill fill, Convert convert, Local local) {
  absl::Status cause = absl::UnavailableError(kConsideredDown);
  if (ShouldCallCoordinator()) {
    Req req;
    fill(&req);
    Resp resp;
    grpc::ClientContext ctx;
    PrepareContext(&ctx);
    const grpc::Status s = (stub_.get()->*rpc)(&ctx, req, &resp);
    if (s.ok()) {
      absl::StatusOr<Result> d = convert(resp);
      if (d.ok()) {
        MarkUp();
        return d;
      }
      MarkDown(grpc::StatusCode::INTERNAL);
      cause = d.status();
    } else if (absl::Status err = ClassifyRpcError(s, &cause); !err.ok()) {
      return err;
    }
  }
  return local(std::move(cause));
}

template <typename Resp>
absl::StatusOr<ClientDecision> CoordinatorClient::FromResponse(
    const Resp& resp) const {
  return resp.has_decision()
             ? FromProto(resp.decision(), clock_->Now())
             : absl::InternalError("coordinator answered no decision");
}

template <typename Resp>
absl::StatusOr<std::vector<ClientDecision>>
CoordinatorClient::FromBatchResponse(const Resp& resp, size_t n) const {
  const absl::Time now = clock_->Now();
  if (static_cast<size_t>(resp.decisions_size()) != n) {
    return absl::InternalError("coordinator answered a batch of the "
                               "wrong size");
  }
  std::vector<ClientDecision> out;
  for (int i = 0; i < resp.decisions_size(); ++i) {
    absl::StatusOr<ClientDecision> d = FromProto(resp.decisions(i), now);
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

template <typename In>
absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::LocalBatch(
    absl::Span<const In> items,
    absl::Status (engine::Engine::*validate)(const In&) const,
    absl::StatusOr<ClientDecision> (CoordinatorClient::*decide)(const In&,
                                                                absl::Status),
    const absl::Status& cause) {
  // Validate everything first so that a bad item changes nothing.
  if (absl::Status s = CheckBatchSize(items.size(), local_->max_batch_size());
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = (local_.get()->*validate)(items[i]); !s.ok()) {
      return ItemError(i, s);
    }
  }
  std::vector<ClientDecision> out;
  out.reserve(items.size());
  for (const In& in : items) {
    absl::StatusOr<ClientDecision> d = (this->*decide)(in, cause);
    if (!d.ok()) return d.status();  // validated above: not expected
    out.push_back(*std::move(d));
  }
  return out;
}

absl::StatusOr<ClientDecision> CoordinatorClient::Admit(
    const engine::AdmitInput& in) {
  return CallOrFallback<ClientDecision>(
      &v1::RetryCoordinator::Stub::Admit,
      [&](v1::AdmitRequest* req) { FillAdmit(in, req); },
      [&](const v1::AdmitResponse& resp) { return FromResponse(resp); },
      [&](absl::Status cause) { return LocalAdmit(in, std::move(cause)); });
}

absl::StatusOr<ClientDecision> CoordinatorClient::Report(
    const engine::ReportInput& in) {
  return CallOrFallback<ClientDecision>(
      &v1::RetryCoordinator::Stub::Report,
      [&](v1::ReportRequest* req) { FillReport(in, req); },
      [&](const v1::ReportResponse& resp) { return FromResponse(resp); },
      [&](absl::Status cause) { return LocalReport(in, std::move(cause)); });
}

absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::AdmitBatch(
    absl::Span<const engine::AdmitInput> items) {
  return CallOrFallback<std::vector<ClientDecision>>(
      &v1::RetryCoordinator::Stub::AdmitBatch,
      [&](v1::AdmitBatchRequest* req) {
        for (const engine::AdmitInput& in : items) {
          FillAdmit(in, req->add_items());
        }
      },
      [&](const v1::AdmitBatchResponse& resp) {
        return FromBatchResponse(resp, items.size());
      },
      [&](absl::Status cause) {
        return LocalBatch(items, &engine::Engine::ValidateAdmit,
                          &CoordinatorClient::LocalAdmit, cause);
      });
}

absl::StatusOr<std::vector<ClientDecision>> CoordinatorClient::ReportBatch(
    absl::Span<const engine::ReportInput> items) {
  return CallOrFallback<std::vector<ClientDecision>>(
      &v1::RetryCoordinator::Stub::ReportBatch,
      [&](v1::ReportBatchRequest* req) {
        for (const engine::ReportInput& in : items) {
          FillReport(in, req->add_items());
        }
      },
      [&](const v1::ReportBatchResponse& resp) {
        return FromBatchResponse(resp, items.size());
      },
      [&](absl::Status cause) {
        return LocalBatch(items, &engine::Engine::ValidateReport,
                          &CoordinatorClient::LocalReport, cause);
      });
}

}  // namespace stagger::client
