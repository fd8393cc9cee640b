#include "client/internal/local_decider.h"

#include <algorithm>
#include <utility>

#include "absl/random/distributions.h"
#include "core/wire/wire.h"

namespace stagger::client {

ClientDecision ToClientDecision(const engine::Decision& d, absl::Time now,
                                DecisionSource source, absl::Status cause) {
  ClientDecision out;
  out.verdict = d.verdict;
  out.reason = d.reason;
  out.delay = d.delay;
  out.attempt = d.attempt;
  out.admission = d.admission;
  if (d.verdict == engine::Verdict::kDefer) {
    out.defer_until = d.defer_until;
    out.defer_for = std::max(absl::ZeroDuration(), d.defer_until - now);
  }
  out.source = source;
  out.fallback_cause = std::move(cause);
  return out;
}

LocalDecider::LocalDecider(const ClientOptions& options,
                           const engine::Clock* clock,
                           engine::RandomSource* random,
                           ClientMetrics* metrics)
    : mode_(options.fallback),
      recheck_interval_(options.recheck_interval),
      clock_(clock),
      random_(random),
      metrics_(metrics),
      engine_(options.local_policy, clock, random) {}

ClientDecision LocalDecider::ClosedDefer(int attempt, absl::Status cause) {
  const absl::Time now = clock_->Now();
  const absl::Duration r = recheck_interval_;
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

std::optional<engine::Decision> LocalDecider::KeepToSet(absl::string_view key,
                                                        int attempt) {
  if (!covering_) return std::nullopt;
  const std::optional<lease::NotClearEntry> e = covering_(key);
  if (!e.has_value()) {
    absl::MutexLock l(&mu_);
    seeded_.erase(key);
    return std::nullopt;
  }
  const absl::Time now = clock_->Now();
  if (e->why == lease::Why::kPaused || e->why == lease::Why::kRetryAfter) {
    if (e->until <= now) return std::nullopt;
    engine::Decision d;
    d.verdict = engine::Verdict::kDefer;
    d.reason = e->why == lease::Why::kPaused
                   ? engine::Reason::kPaused
                   : engine::Reason::kRetryAfterWindow;
    d.defer_until = e->until;
    d.attempt = attempt;
    return d;
  }
  {
    absl::MutexLock l(&mu_);
    if (seeded_.contains(key)) return std::nullopt;
    if (seeded_.size() >= kMaxSeeded) seeded_.clear();
    seeded_.insert(std::string(key));
  }
  if (engine_.Track(key)) {
    const absl::Duration open =
        engine_.config().default_policy.breaker.open_base;
    (void)engine_.ForceBreaker(key, engine::BreakerState::kOpen, open);
  }
  return std::nullopt;
}

absl::StatusOr<ClientDecision> LocalDecider::Admit(const AdmitRequest& in,
                                                   absl::Status cause) {
  ClientDecision out;
  if (mode_ == FallbackMode::kFailClosed) {
    if (absl::Status v = engine_.ValidateAdmit(in); !v.ok()) return v;
    out = ClosedDefer(in.attempt, std::move(cause));
  } else {
    if (absl::Status v = engine_.ValidateAdmit(in); !v.ok()) return v;
    std::optional<engine::Decision> kept = KeepToSet(in.endpoint, in.attempt);
    absl::StatusOr<engine::Decision> d =
        kept.has_value() ? *kept : engine_.Admit(in);
    if (!d.ok()) return d.status();
    // Admitted without the coordinator: never its probe (a probe of the
    // local engine's own breaker keeps its token, salted apart).
    if (d->admission == engine::kCoordinatorAdmission) {
      d->admission = engine::kLocalAdmission;
    }
    out = ToClientDecision(*d, clock_->Now(), DecisionSource::kLocalFallback,
                           std::move(cause));
  }
  metrics_->CountFallback(Call::kAdmit, out.verdict);
  return out;
}

absl::StatusOr<ClientDecision> LocalDecider::Report(const ReportRequest& in,
                                                    absl::Status cause) {
  ClientDecision out;
  if (mode_ == FallbackMode::kFailClosed) {
    if (absl::Status v = engine_.ValidateReport(in); !v.ok()) return v;
    // Fail-closed only refuses to *send* without the coordinator. Answers
    // that send nothing need no coordination: a success is done, a
    // non-retryable outcome gives up; any other failure defers the next
    // attempt (no attempt consumed) until the coordinator can be asked.
    const bool success = in.outcome == engine::Outcome::kSuccess;
    if (success || in.outcome == engine::Outcome::kNotRetryable) {
      engine::Decision d;
      d.verdict = success ? engine::Verdict::kDone : engine::Verdict::kGiveUp;
      d.reason = success ? engine::Reason::kSucceeded
                         : engine::Reason::kNotRetryable;
      d.attempt = success ? in.attempt : in.attempt + 1;
      out = ToClientDecision(d, clock_->Now(), DecisionSource::kLocalFallback,
                             std::move(cause));
    } else {
      out = ClosedDefer(in.attempt + 1, std::move(cause));
    }
  } else {
    if (absl::Status v = engine_.ValidateReport(in); !v.ok()) return v;
    std::optional<engine::Decision> kept;
    if (in.outcome != engine::Outcome::kSuccess &&
        in.outcome != engine::Outcome::kNotRetryable) {
      kept = KeepToSet(in.endpoint, in.attempt + 1);
    }
    absl::StatusOr<engine::Decision> d =
        kept.has_value() ? *kept : engine_.Report(in);
    if (!d.ok()) return d.status();
    out = ToClientDecision(*d, clock_->Now(), DecisionSource::kLocalFallback,
                           std::move(cause));
  }
  metrics_->CountFallback(Call::kReport, out.verdict);
  return out;
}

namespace {

template <typename In, typename Validate>
absl::Status CheckBatch(absl::Span<const In> items, int max,
                        Validate validate) {
  if (absl::Status s = wire::CheckBatchSize(items.size(), max); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = validate(items[i]); !s.ok()) {
      return wire::PrefixItem(s, i);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LocalDecider::ValidateBatch(
    absl::Span<const AdmitRequest> items) const {
  return CheckBatch(items, engine_.max_batch_size(),
                    [&](const AdmitRequest& in) {
                      return engine_.ValidateAdmit(in);
                    });
}

absl::Status LocalDecider::ValidateBatch(
    absl::Span<const ReportRequest> items) const {
  return CheckBatch(items, engine_.max_batch_size(),
                    [&](const ReportRequest& in) {
                      return engine_.ValidateReport(in);
                    });
}

template <typename In, typename Decide>
absl::StatusOr<std::vector<ClientDecision>> LocalDecider::Batch(
    absl::Span<const In> items, const absl::Status& cause, Decide decide) {
  // Validate everything first so that a bad item changes nothing.
  if (absl::Status s = ValidateBatch(items); !s.ok()) return s;
  std::vector<ClientDecision> out;
  out.reserve(items.size());
  for (const In& in : items) {
    absl::StatusOr<ClientDecision> d = decide(in, cause);
    if (!d.ok()) return d.status();  // validated above: not expected
    out.push_back(*std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<ClientDecision>> LocalDecider::AdmitBatch(
    absl::Span<const AdmitRequest> items, const absl::Status& cause) {
  return Batch(items, cause, [this](const AdmitRequest& in, absl::Status c) {
    return Admit(in, std::move(c));
  });
}

absl::StatusOr<std::vector<ClientDecision>> LocalDecider::ReportBatch(
    absl::Span<const ReportRequest> items, const absl::Status& cause) {
  return Batch(items, cause, [this](const ReportRequest& in, absl::Status c) {
    return Report(in, std::move(c));
  });
}

}  // namespace stagger::client
