#include "core/engine/engine.h"

#include <utility>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/engine/admission.h"
#include "core/engine/compiled_config.h"
#include "core/engine/decision_path.h"
#include "core/engine/key_validation.h"
#include "core/engine/endpoint_lifecycle.h"
#include "core/engine/endpoint_table.h"
#include "core/engine/state_transfer.h"

namespace stagger::engine {
namespace {

// Attempt numbers above this are bad input, whatever the policy says.
constexpr int kMaxAttemptNumber = 1000000;

absl::Status ValidateAttempt(int attempt) {
  if (attempt < 1 || attempt > kMaxAttemptNumber) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attempt: must be in [1, ", kMaxAttemptNumber, "], got ", attempt));
  }
  return absl::OkStatus();
}

// retry_after and ratelimit_reset: both in [0, kMaxRetryAfter].
absl::Status ValidateEndpointWait(absl::string_view field, absl::Duration ra) {
  if (ra < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be >= 0, got ", absl::FormatDuration(ra)));
  }
  if (ra > kMaxRetryAfter) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be <= ", absl::FormatDuration(kMaxRetryAfter),
        ", got ", absl::FormatDuration(ra)));
  }
  return absl::OkStatus();
}

absl::Status ValidateWait(absl::Duration wait) {
  if (wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait: must be >= 0, got ", absl::FormatDuration(wait)));
  }
  if (wait > kMaxWait) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wait: must be <= ", absl::FormatDuration(kMaxWait), ", got ",
        absl::FormatDuration(wait)));
  }
  return absl::OkStatus();
}

absl::Status NotTracked(absl::string_view endpoint) {
  return absl::NotFoundError(
      absl::StrCat("endpoint: not tracked: \"", endpoint, "\""));
}

}  // namespace

Engine::Engine(EngineConfig config, const Clock* clock, RandomSource* random)
    : clock_(clock),
      random_(random),
      token_salt_(absl::Uniform<uint32_t>(random->Get(), 1, 0x7fffffff)),
      max_key_bytes_(config.limits.max_key_bytes),
      max_batch_size_(config.limits.max_batch_size) {
  table_ = std::make_unique<EndpointTable>(
      CompiledConfig::Compile(std::move(config), nullptr));
}

Engine::~Engine() = default;

void Engine::SetConfig(EngineConfig config) {
  absl::MutexLock reload(&set_config_mu_);
  const int max_key_bytes = config.limits.max_key_bytes;
  const int max_batch_size = config.limits.max_batch_size;
  const std::shared_ptr<const CompiledConfig> old = table_->config();
  std::shared_ptr<const CompiledConfig> compiled =
      CompiledConfig::Compile(std::move(config), old.get());
  max_key_bytes_.store(max_key_bytes, std::memory_order_relaxed);
  max_batch_size_.store(max_batch_size, std::memory_order_relaxed);
  table_->SetConfig(std::move(compiled));
}

EngineConfig Engine::config() const { return table_->config()->config; }

absl::Status Engine::ValidateAdmit(const AdmitInput& in) const {
  if (absl::Status s = ValidateEndpointKey(
          in.endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateAttempt(in.attempt); !s.ok()) return s;
  return ValidateWait(in.wait);
}

absl::Status Engine::ValidateReport(const ReportInput& in) const {
  if (absl::Status s = ValidateEndpointKey(
          in.endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateAttempt(in.attempt); !s.ok()) return s;
  const int o = static_cast<int>(in.outcome);
  if (o < static_cast<int>(Outcome::kSuccess) ||
      o > static_cast<int>(Outcome::kNotRetryable)) {
    return absl::InvalidArgumentError(
        absl::StrCat("outcome: unknown value ", o));
  }
  if (in.retry_after.has_value()) {
    if (absl::Status s = ValidateEndpointWait("retry_after", *in.retry_after);
        !s.ok()) {
      return s;
    }
  }
  if (in.ratelimit_reset.has_value()) {
    return ValidateEndpointWait("ratelimit_reset", *in.ratelimit_reset);
  }
  return absl::OkStatus();
}

template <typename Input, typename DecideFn>
auto Engine::DecideOn(const Input& in, bool after_failure, DecideFn decide) {
  const absl::Time now = clock_->Now();
  absl::BitGenRef rng = random_->Get();
  const absl::Time paused_until = pauses_.PausedUntil(in.endpoint, now);
  return table_->WithState(
      in.endpoint, now,
      [&](EndpointState& st, const PolicyParams& p, bool untracked) {
        DecisionContext c{st,
                          p,
                          now,
                          EffectiveDeadline(p, in.deadline,
                                            in.first_attempt_time),
                          rng,
                          untracked ? nullptr : table_.get(),
                          after_failure,
                          paused_until,
                          token_salt_,
                          probe_hold_ ? &probe_hold_ : nullptr};
        if (!untracked) CheckUnavailable(st, p, now);
        auto decided = decide(c, in);
        if (!untracked) {
          TrackUnavailable(st, now);
          ReportCondition(st, p, now, condition_sink_);
        }
        return decided;
      });
}

absl::StatusOr<Decision> Engine::Admit(const AdmitInput& in) {
  if (absl::Status s = ValidateAdmit(in); !s.ok()) return s;
  return DecideOn(in, /*after_failure=*/false,
                  [](DecisionContext& c, const AdmitInput& a) {
                    return DecideAdmit(c, a);
                  });
}

absl::StatusOr<WaitOutcome> Engine::AdmitWaiting(const AdmitInput& in,
                                                 WaitState* w, WaitStep step) {
  if (step == WaitStep::kArrive) {
    if (absl::Status s = ValidateAdmit(in); !s.ok()) return s;
  }
  return DecideOn(in, /*after_failure=*/false,
                  [w, step](DecisionContext& c, const AdmitInput& a) {
                    return DecideWaiting(c, a, *w, step);
                  });
}

absl::StatusOr<Decision> Engine::Report(const ReportInput& in) {
  if (absl::Status s = ValidateReport(in); !s.ok()) return s;
  return DecideOn(in, /*after_failure=*/true,
                  [this](DecisionContext& c, const ReportInput& r) {
                    Decision d = DecideReport(c, r);
                    if (c.table == nullptr) return d;  // untracked
                    if (r.outcome == Outcome::kSuccess) {
                      ForgetPermanentFailures(c.st, disables_);
                    } else if (d.reason == Reason::kNotRetryable) {
                      // The endpoint answered it (not paused, disabled).
                      if (std::optional<engine::Disable> off =
                              CountPermanentFailure(c.st, c.p, c.now,
                                                    disables_)) {
                        DisableLocked(c.st, c.p, c.now, *std::move(off))
                            .IgnoreError();  // full: not disabled
                      }
                    }
                    return d;
                  });
}

absl::Status Engine::DisableLocked(EndpointState& st, const PolicyParams& p,
                                   absl::Time now, engine::Disable d) {
  const DisableTrigger trigger = d.trigger;
  const engine::Disable note = d;
  if (absl::Status s = disables_.Put(std::move(d)); !s.ok()) return s;
  const bool was = st.disabled;
  st.disabled = 1;
  ReportCondition(st, p, now, condition_sink_, {&note, nullptr});
  if (!was) {
    disables_total_[static_cast<int>(trigger)].fetch_add(
        1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void Engine::CheckUnavailable(EndpointState& st, const PolicyParams& p,
                              absl::Time now) {
  TrackUnavailable(st, now);
  if (std::optional<engine::Disable> off = UnavailableTrigger(st, p, now)) {
    DisableLocked(st, p, now, *std::move(off)).IgnoreError();
  }
}

absl::Status Engine::Disable(absl::string_view endpoint, engine::Disable d) {
  if (absl::Status s = ValidateEndpointKey(
          endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  d.endpoint = std::string(endpoint);
  d.trigger = DisableTrigger::kOperator;
  d.since = now;
  return table_->WithState(
      endpoint, now,
      [&](EndpointState& st, const PolicyParams& p, bool untracked) {
        if (untracked) {
          return absl::ResourceExhaustedError(
              "endpoint: cannot be tracked (limits.max_endpoints reached, "
              "none idle): a disabled endpoint must be");
        }
        return DisableLocked(st, p, now, std::move(d));
      });
}

absl::Status Engine::RestoreDisable(engine::Disable d) {
  if (absl::Status s = ValidateEndpointKey(
          d.endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  const std::string key = d.endpoint;
  return table_->WithState(
      key, now, [&](EndpointState& st, const PolicyParams& p, bool untracked) {
        if (untracked) {
          return absl::ResourceExhaustedError(
              "endpoint: cannot be tracked (limits.max_endpoints)");
        }
        const engine::Disable note = d;
        if (absl::Status s = disables_.Put(std::move(d)); !s.ok()) return s;
        st.disabled = 1;
        ReportCondition(st, p, now, condition_sink_, {&note, nullptr});
        return absl::OkStatus();
      });
}

absl::StatusOr<engine::Disable> Engine::Enable(absl::string_view endpoint,
                                               const engine::Enable& e) {
  if (absl::Status s = ValidateEndpointKey(
          endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  std::optional<engine::Disable> ended;
  table_->WithTrackedMutable(
      endpoint, [&](EndpointState& st, const PolicyParams& p) {
        ended = disables_.Remove(endpoint);
        if (!ended.has_value()) return;
        st.disabled = 0;
        RestartTriggers(st, now, disables_);
        ReportCondition(st, p, now, condition_sink_, {nullptr, &e});
      });
  if (!ended.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("endpoint: not disabled: \"", endpoint, "\""));
  }
  return *std::move(ended);
}

absl::StatusOr<EndpointSnapshot> Engine::Inspect(
    absl::string_view endpoint) const {
  if (absl::Status s = ValidateEndpointKey(
          endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  absl::StatusOr<EndpointSnapshot> snap =
      InspectEndpoint(*table_, endpoint, now);
  if (snap.ok()) {
    snap->pause = pauses_.Find(endpoint, now);
    snap->disable = disables_.Find(endpoint);
  }
  return snap;
}

ListPage Engine::List(absl::string_view after, int page_size,
                      std::optional<BreakerState> state) const {
  const absl::Time now = clock_->Now();
  ListPage page = ListEndpoints(*table_, after, page_size, state, now);
  for (EndpointSnapshot& snap : page.endpoints) {
    snap.pause = pauses_.Find(snap.endpoint, now);
    snap.disable = disables_.Find(snap.endpoint);
  }
  return page;
}

ListPage Engine::ListNotClear(absl::string_view after,
                              int page_size) const {
  const absl::Time now = clock_->Now();
  // PausedUntil is one atomic load while no pause is in force; else a
  // reader lock on the pause table (a leaf lock: it never takes a shard's).
  ListPage page = ListMatching(
      *table_, after, page_size,
      [&](const EndpointState& st) {
        return NotClearAt(st, now) || pauses_.PausedUntil(st.key(), now) > now;
      },
      now);
  for (EndpointSnapshot& snap : page.endpoints) {
    snap.pause = pauses_.Find(snap.endpoint, now);
    snap.disable = disables_.Find(snap.endpoint);
  }
  return page;
}

bool Engine::Track(absl::string_view endpoint) {
  return table_->WithState(
      endpoint, clock_->Now(),
      [](EndpointState&, const PolicyParams&, bool untracked) {
        return !untracked;
      });
}

absl::Status Engine::ResetEndpoint(absl::string_view endpoint) {
  if (absl::Status s = ValidateEndpointKey(
          endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  if (!table_->Erase(endpoint, clock_->Now())) return NotTracked(endpoint);
  disables_.ForgetStrikes(endpoint);
  return absl::OkStatus();
}

absl::StatusOr<EndpointSnapshot> Engine::ForceBreaker(
    absl::string_view endpoint, BreakerState to, absl::Duration open_for) {
  if (absl::Status s = ValidateEndpointKey(
          endpoint, max_key_bytes_.load(std::memory_order_relaxed));
      !s.ok()) {
    return s;
  }
  if (to == BreakerState::kHalfOpen) {
    return absl::InvalidArgumentError("state: must be OPEN or CLOSED");
  }
  if (to == BreakerState::kOpen && open_for <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("open_for: must be > 0");
  }
  const absl::Time now = clock_->Now();
  absl::BitGenRef rng = random_->Get();
  const bool tracked = table_->WithTrackedMutable(
      endpoint, [&](EndpointState& st, const PolicyParams& p) {
        DecisionContext c{st,  p,   now, absl::InfiniteFuture(),
                          rng, table_.get(), /*after_failure=*/false};
        ApplyForcedBreaker(c, to == BreakerState::kOpen
                                  ? st.breaker.ForceOpen(now + open_for)
                                  : st.breaker.ForceClosed());
        TrackUnavailable(st, now);
        ReportCondition(st, p, now, condition_sink_);
      });
  if (!tracked) return NotTracked(endpoint);
  return Inspect(endpoint);
}

LeaseTerms Engine::LeaseTermsFor(absl::string_view endpoint) {
  const absl::Time now = clock_->Now();
  const bool paused = pauses_.PausedUntil(endpoint, now) > now;
  LeaseTerms terms;
  const bool tracked = table_->WithTrackedMutable(
      endpoint, [&](EndpointState& st, const PolicyParams& p) {
        terms = TermsFor(st, p, now, paused);
      });
  if (!tracked) {
    const std::shared_ptr<const CompiledConfig> config = table_->config();
    terms.clear = !paused;
    terms.initial_jitter =
        config->Policy(config->Resolve(endpoint)).backoff.initial_jitter;
  }
  return terms;
}

bool Engine::ApplyLateCounts(absl::string_view endpoint,
                             absl::Span<const LateCounts> buckets) {
  const absl::Time now = clock_->Now();
  const int64_t share = static_cast<int64_t>(
      static_cast<double>(table_->config()->config.limits.max_endpoints) *
      kLateCountsEndpointShare);
  return table_->WithState(
      endpoint, now,
      [&](EndpointState& st, const PolicyParams& p, bool untracked) {
        if (untracked) {
          late_counts_dropped_.fetch_add(1, std::memory_order_relaxed);
          return false;
        }
        for (const LateCounts& b : buckets) {
          engine::ApplyLateCounts(st, p, now, b);
          // A success between permanent failures ends their run.
          if (b.successes > 0) {
            ForgetPermanentFailures(st, disables_);
          }
        }
        ReportCondition(st, p, now, condition_sink_);
        return true;
      },
      share);
}

absl::Time Engine::LastEvidence(absl::string_view endpoint) const {
  const absl::Time now = clock_->Now();
  absl::Time evidence = absl::InfinitePast();
  table_->WithTracked(endpoint,
                      [&](const EndpointState& st, const CompiledConfig&) {
                        evidence = engine::LastEvidence(st, now);
                      });
  return evidence;
}

void Engine::set_condition_sink(ConditionSink* sink) {
  condition_sink_ = sink;
  table_->set_condition_sink(sink);
}

void Engine::RefreshCondition(absl::string_view endpoint) {
  const absl::Time now = clock_->Now();
  table_->WithTrackedMutable(
      endpoint, [&](EndpointState& st, const PolicyParams& p) {
        CheckUnavailable(st, p, now);
        ReportCondition(st, p, now, condition_sink_);
      });
}

void Engine::ReturnProbe(absl::string_view endpoint, uint64_t admission) {
  table_->WithTrackedMutable(endpoint, [&](EndpointState& st,
                                           const PolicyParams&) {
    if (admission == ProbeAdmission(token_salt_, st.breaker.generation())) {
      st.breaker.ReturnProbe();
    }
  });
}

int64_t Engine::EvictIdle() { return table_->EvictIdle(clock_->Now()); }

EngineStats Engine::Stats() const {
  EngineStats stats = table_->Stats();
  stats.late_counts_dropped =
      late_counts_dropped_.load(std::memory_order_relaxed);
  stats.disabled = disables_.size();
  for (size_t i = 0; i < disables_total_.size(); ++i) {
    stats.disables_total[i] = disables_total_[i].load(std::memory_order_relaxed);
  }
  return stats;
}

void Engine::ExportState(
    absl::FunctionRef<void(absl::Span<const EndpointRecord>)> sink) const {
  const absl::Time now = clock_->Now();
  std::vector<EndpointRecord> shard;
  table_->VisitByShard(
      [&](const EndpointState& st, const PolicyParams& p) {
        shard.push_back(SaveEndpoint(st, p, now));
      },
      [&] {
        if (!shard.empty()) sink(shard);
        shard.clear();
      });
}

ImportStats Engine::ImportState(absl::Span<const EndpointRecord> records) {
  const absl::Time now = clock_->Now();
  const int64_t cutoff = absl::ToUnixNanos(
      now - table_->config()->config.limits.idle_eviction);
  const int max_key_bytes = max_key_bytes_.load(std::memory_order_relaxed);
  ImportStats stats;
  for (const EndpointRecord& r : records) {
    if (r.last_seen_ns < cutoff) {
      ++stats.stale;
    } else if (!ValidateEndpointKey(r.key, max_key_bytes).ok()) {
      ++stats.rejected;
    } else if (table_->InsertRestored(
                   r.key, [&](EndpointState& st, const PolicyParams& p) {
                     RestoreEndpoint(r, p, &st);
                     ReportCondition(st, p, now, condition_sink_);
                   }) == EndpointTable::InsertResult::kInserted) {
      ++stats.restored;
    } else {
      ++stats.skipped;
    }
  }
  return stats;
}

}  // namespace stagger::engine
