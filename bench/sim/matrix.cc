#include "bench/sim/matrix.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/sim/report.h"

namespace stagger::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A grid scenario's starting point: `fleet` deliveries, one endpoint down
// in [0, outage) answering 500, then healthy with unlimited capacity; one
// worker process (retry budget) per 1,000 deliveries, as in the default
// scenario's 10 processes for 10,000. Everything else is Scenario's default.
Scenario Base(int fleet, absl::Duration outage) {
  Scenario s;
  s.subscriptions = fleet;
  s.endpoints = {OutageEndpoint(outage)};
  s.workers = std::max(1, fleet / 1000);
  return s;
}

Scenario WithCapacity(Scenario s, double capacity_per_second) {
  for (EndpointSpec& e : s.endpoints) {
    e.capacity_per_second = capacity_per_second;
  }
  return s;
}

Scenario WithRetryAfter(Scenario s, absl::Duration retry_after) {
  for (EndpointSpec& e : s.endpoints) e.down_retry_after = retry_after;
  return s;
}

// Real limiters after a 20 s outage (503 while down, as nginx's `return
// 503`): 1,600 deliveries, answers in 50 ms (the longest round trip the
// over-capacity bar is stated for). Added to the grid by Grid().
template <typename Add>
void AddLimiters(Add& add) {
  auto limited = [](LimiterKind kind, int refusal_status) {
    Scenario s = Base(1600, absl::Seconds(20));
    s.workers = 2;
    s.response_time = absl::Milliseconds(50);
    EndpointSpec& e = s.endpoints[0];
    e.down_rate_limited = true;
    e.capacity_per_second = 200;
    e.limiter = kind;
    e.refusal.status = refusal_status;
    return s;
  };
  {
    Scenario s = limited(LimiterKind::kTokenBucket, 429);
    s.endpoints[0].burst = 20;
    add("limiter_429_200_1600",
        "nginx's limit_req rate=200r/s burst=20 nodelay: 429, no "
        "Retry-After",
        s);
    s.endpoints[0].refusal.retry_after = true;
    add("limiter_429_retry_after_200_1600",
        "the same bucket; its 429s say Retry-After (the seconds until a "
        "token, rounded up)",
        s);
  }
  {
    Scenario s = limited(LimiterKind::kTokenBucket, 429);
    s.endpoints[0].burst = 20;
    s.endpoints[0].refusal.ratelimit_reset = true;
    add("limiter_429_ratelimit_reset_200_1600",
        "the same bucket; its 429s say RateLimit-Reset (the seconds until "
        "it is full, rounded up) and no Retry-After",
        s);
  }
  {
    Scenario s = limited(LimiterKind::kQueue, 503);
    s.subscriptions = 2000;
    s.endpoints[0].servers = 20;
    s.endpoints[0].queue_timeout = absl::Seconds(1);
    add("queue_server_200_2k",
        "20 workers, 100 ms each, and a queue: the answers slow down up to "
        "1 s of wait, then 503",
        s);
  }
  {
    Scenario s = limited(LimiterKind::kTokenBucket, 429);
    s.endpoints[0].burst = 20;
    s.endpoints[0].hidden_per_second = 100;
    add("shared_limiter_200_1600",
        "the 200/s bucket shared with 100/s of traffic the fleet cannot "
        "see: 100/s left for it",
        s);
  }
}

// The same endpoint failing again and again while deliveries keep
// coming, on the engine's attempt limit: no delivery may give up because
// it was chosen as a probe, or let go by evidence older than its failure.
// Added to the grid by Grid().
template <typename Add>
void AddRepeatedOutages(Add& add) {
  Scenario s = Base(4000, absl::ZeroDuration());
  s.arrival_rate = 50;
  s.max_attempts = engine::ranges::kBackoffMaxAttempts.default_value;
  s.endpoints[0].down = Flapping(absl::Seconds(8), absl::Seconds(12), 4);
  add("repeated_outages_8s_4k",
      "deliveries arrive at 50/s for 80 s; 8 attempts (the engine's "
      "default); nothing may be given up",
      s);
}

// The grid. One place: add a line here to add a scenario.
std::vector<MatrixScenario> Grid() {
  const absl::Duration k2s = absl::Seconds(2), k20s = absl::Seconds(20),
                       k60s = absl::Seconds(60), k2min = absl::Minutes(2);
  std::vector<MatrixScenario> g;
  auto add = [&g](std::string key, std::string note, Scenario s) {
    g.push_back({std::move(key), std::move(note), std::move(s)});
  };
  // Fleet size and outage length, unlimited capacity after recovery.
  add("baseline_10k_20s", "the default scenario (stagger-sim with no flags)",
      Base(10000, k20s));
  add("fleet_1k_20s", "", Base(1000, k20s));
  add("fleet_100k_20s", "", Base(100000, k20s));
  add("outage_2s_10k", "", Base(10000, k2s));
  {
    Scenario s = Base(10000, k2min);
    s.horizon = absl::Minutes(10);
    add("outage_2min_10k",
        "horizon 10 min (not 120 s), so that a delivery can outlive the "
        "outage",
        s);
  }
  add("outage_60s_50k", "", Base(50000, k60s));
  // Finite capacity after recovery, each within reach of the fleet but
  // the last.
  add("capacity_2000_100k", "", WithCapacity(Base(100000, k20s), 2000));
  add("capacity_500_10k", "", WithCapacity(Base(10000, k20s), 500));
  add("capacity_100_5k", "", WithCapacity(Base(5000, k20s), 100));
  add("capacity_50_2k", "", WithCapacity(Base(2000, k20s), 50));
  add("saturated_capacity_50_10k",
      "saturated: no policy can deliver the whole fleet before the horizon",
      WithCapacity(Base(10000, k20s), 50));
  // 503 with Retry-After while down, instead of 500.
  add("retry_after_5s_10k", "", WithRetryAfter(Base(10000, k20s),
                                               absl::Seconds(5)));
  add("retry_after_5s_capacity_500_10k", "",
      WithCapacity(WithRetryAfter(Base(10000, k20s), absl::Seconds(5)), 500));
  // A flapping endpoint: four 5 s outages, 3 s apart, with unlimited
  // capacity (a retry that lands in an up window succeeds) and with
  // 1,000/s.
  {
    Scenario s = Base(10000, absl::ZeroDuration());
    s.endpoints[0].down = Flapping(absl::Seconds(5), absl::Seconds(3), 4);
    add("flapping_4x5s_10k", "", s);
    add("flapping_4x5s_capacity_1000_10k", "", WithCapacity(s, 1000));
  }
  // Several endpoints sharing one pool of workers, one of them down.
  {
    Scenario s = Base(10000, k20s);
    s.endpoints.resize(4);  // #1..#3: always up, unlimited
    s.concurrency = 200;
    add("shared_pool_4x_w200_10k",
        "200 workers answer at most 800 attempts/s, so the fleet needs "
        ">= 12.5 s of workers",
        s);
  }
  AddLimiters(add);
  AddRepeatedOutages(add);
  return g;
}

std::string Rule(const BarCheck& c) { return c.at_least ? ">=" : "<="; }

// A check's value or limit: counts whole (delivered) or to 0.1 (wasted
// limits), times to 0.01 s, "inf" for never / no constraint.
std::string Number(double v, bool time) {
  if (std::isinf(v)) return "inf";
  if (time) return absl::StrFormat("%.2f", v);
  if (v == std::floor(v)) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.1f", v);
}

std::string ReadableNumber(double v, bool time) {
  if (time) return std::isinf(v) ? "never" : absl::StrFormat("%.2f s", v);
  if (v == std::floor(v)) return Thousands(v);
  const int64_t tenths = std::llround(v * 10);  // 7141.7 -> "7,141.7"
  return absl::StrCat(Thousands(static_cast<double>(tenths / 10)), ".",
                      tenths % 10);
}

std::string Verdict(bool pass) { return pass ? "PASS" : "FAIL"; }

const PolicyResult* Find(const MatrixResult& r, Policy p) {
  for (const PolicyResult& row : r.rows) {
    if (row.policy == p) return &row;
  }
  return nullptr;
}

double OrInf(const std::optional<double>& t) { return t ? *t : kInf; }

// (c)'s formula over the independent rows' times (inf: never).
BarCheck TimeCheck(double coordinated, const std::vector<double>& independent) {
  BarCheck c;
  c.applies = true;
  c.value = coordinated;
  const double best =
      independent.empty()
          ? kInf
          : *std::min_element(independent.begin(), independent.end());
  c.limit = std::isinf(best) ? kInf : 1.1 * best + 1.0;
  return c;
}

bool IsSharedPool(const Scenario& s) {
  return s.concurrency > 0 && MixesHealthyAndDown(s);
}

void KeepWorst(const BarCheck& c, uint64_t seed, AggregatedBar::Worst* w,
               bool first) {
  if (c.Passes()) ++w->seeds_passed;
  if (first || c.Margin() < w->check.Margin()) {
    w->check = c;
    w->seed = seed;
  }
}

}  // namespace

std::vector<MatrixScenario> MatrixGrid(uint64_t seed) {
  std::vector<MatrixScenario> g = Grid();
  for (MatrixScenario& m : g) m.scenario.seed = seed;
  return g;
}

std::vector<MatrixScenario> ExtraScenarios(uint64_t seed) {
  std::vector<MatrixScenario> g;
  {
    // A tenant's endpoint dead for a week, one delivery a minute, with the
    // platform's disable option on (off by default: the one engine setting
    // a scenario makes).
    Scenario s = Base(10080, absl::Hours(24 * 7));
    s.arrival_rate = 1.0 / 60;
    s.engine_policy.disable.after_unavailable = absl::Hours(72);
    s.max_virtual_time = absl::Hours(24 * 8);
    g.push_back({"dead_week_disable_72h",
                 "disable.after_unavailable 72 h: no attempt after the "
                 "disable",
                 s});
  }
  for (MatrixScenario& m : g) m.scenario.seed = seed;
  return g;
}

std::optional<MatrixScenario> FindMatrixScenario(absl::string_view key,
                                                 uint64_t seed) {
  for (MatrixScenario& m : MatrixGrid(seed)) {
    if (m.key == key) return std::move(m);
  }
  for (MatrixScenario& m : ExtraScenarios(seed)) {
    if (m.key == key) return std::move(m);
  }
  return std::nullopt;
}

std::optional<double> CapacityBound(const Scenario& s) {
  if (s.endpoints.size() != 1 || s.endpoints[0].capacity_per_second <= 0 ||
      s.horizon <= absl::ZeroDuration()) {
    return std::nullopt;
  }
  return s.endpoints[0].FleetCapacity() *
         absl::ToDoubleSeconds(s.horizon - Recovery(s));
}

bool IsLimited(const Scenario& s) {
  return std::any_of(s.endpoints.begin(), s.endpoints.end(),
                     [](const EndpointSpec& e) {
                       return !e.down.empty() && e.capacity_per_second > 0;
                     });
}

bool SharesLimiter(const Scenario& s) {
  return std::any_of(s.endpoints.begin(), s.endpoints.end(),
                     [](const EndpointSpec& e) {
                       return !e.down.empty() && e.capacity_per_second > 0 &&
                              e.hidden_per_second > 0;
                     });
}

bool IsJittered(Policy p) {
  return p == Policy::kEqualJitter || p == Policy::kFullJitter ||
         p == Policy::kDecorrelatedJitter || p == Policy::kFullJitterBudget;
}

absl::StatusOr<std::vector<MatrixResult>> RunMatrix(
    const std::vector<MatrixScenario>& grid, int jobs,
    const std::vector<Policy>& policies) {
  std::vector<MatrixResult> out(grid.size());
  // One task per (scenario, policy); each writes only its own slot.
  const size_t per = policies.size();
  const size_t tasks = grid.size() * per;
  std::vector<absl::StatusOr<PolicyResult>> done(
      tasks, absl::UnknownError("not run"));
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t t = next++; t < tasks; t = next++) {
      done[t] = Simulate(grid[t / per].scenario, policies[t % per]);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, jobs); ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < grid.size(); ++i) {
    out[i].scenario = grid[i];
    for (size_t j = 0; j < per; ++j) {
      absl::StatusOr<PolicyResult>& r = done[i * per + j];
      if (!r.ok()) {
        return absl::Status(
            r.status().code(),
            absl::StrCat(grid[i].key, " / ", PolicyKey(policies[j]), ": ",
                         r.status().message()));
      }
      out[i].rows.push_back(*std::move(r));
    }
  }
  return out;
}

bool BarCheck::Passes() const {
  if (!applies) return true;
  return at_least ? value >= limit : value <= limit;
}

double BarCheck::Margin() const {
  if (!applies) return kInf;
  if (at_least) return value - limit;
  if (std::isinf(limit)) return kInf;
  if (std::isinf(value)) return -kInf;
  return limit - value;
}

BarCheck LimitTarget(const PolicyResult& c) {
  BarCheck check;
  if (!c.limit_s.has_value()) return check;
  check.applies = true;
  check.value = OrInf(c.recovery_to_99_s);
  check.limit = 1.2 * *c.limit_s + 0.5;
  return check;
}

BarCheck RecoveryTo100(const PolicyResult& c) {
  BarCheck check;
  if (!c.limit_s.has_value()) return check;
  check.applies = true;
  check.value = OrInf(c.recovery_to_100_s);
  check.limit = 1.5 * *c.limit_s + 1.0;
  return check;
}

bool ScenarioBar::Passes() const {
  return delivered.Passes() && wasted.Passes() && time_to_99.Passes() &&
         healthy_time_to_99.Passes() && given_up.Passes() &&
         over_capacity.Passes() && recovery_to_100.Passes() &&
         (!limit_enforced || limit_target.Passes());
}

namespace {

// (e), (f), (g) and the limit target.
void EvaluateRecovery(const Scenario& s, const PolicyResult& c,
                      ScenarioBar* bar) {
  const std::optional<double> bound = CapacityBound(s);
  if (!bound || *bound >= s.subscriptions) {
    bar->given_up.applies = true;
    bar->given_up.value = static_cast<double>(c.given_up + c.unfinished);
    bar->given_up.limit = 0;
  }
  bar->limit_target = LimitTarget(c);
  // A saturated endpoint: every delivery it cannot serve still takes its
  // last chance (decision_path.h), into the limiter.
  if (!IsLimited(s) || !c.limit_s.has_value()) return;
  bar->over_capacity.applies = true;
  bar->over_capacity.value = static_cast<double>(c.over_capacity);
  bar->over_capacity.limit =
      (SharesLimiter(s) ? kSharedOverCapacityShare : kOverCapacityShare) *
      s.subscriptions;
  bar->recovery_to_100 = RecoveryTo100(c);
  bar->limit_enforced = bar->limit_target.applies;
}

}  // namespace

ScenarioBar EvaluateBar(const MatrixResult& r) {
  ScenarioBar bar;
  bar.key = r.scenario.key;
  bar.seed = r.scenario.scenario.seed;
  const PolicyResult* c = Find(r, Policy::kCoordinated);
  const PolicyResult* full = Find(r, Policy::kFullJitter);
  if (c == nullptr || full == nullptr) return bar;  // nothing applies
  int64_t best = 0;
  std::vector<double> times, healthy_times;
  for (const PolicyResult& row : r.rows) {
    if (row.policy == Policy::kCoordinated) continue;
    best = std::max(best, row.delivered);
    if (!IsJittered(row.policy)) continue;
    times.push_back(OrInf(row.time_to_99_s));
    healthy_times.push_back(OrInf(row.healthy_time_to_99_s));
  }
  bar.delivered.applies = true;
  bar.delivered.at_least = true;
  bar.delivered.value = static_cast<double>(c->delivered);
  bar.delivered.limit = static_cast<double>(best - best / 1000);
  bar.wasted.applies = true;
  bar.wasted.value = static_cast<double>(c->wasted_attempts);
  bar.wasted.limit = static_cast<double>(full->wasted_attempts) / 10.0;
  bar.time_to_99 = TimeCheck(OrInf(c->time_to_99_s), times);
  if (IsSharedPool(r.scenario.scenario)) {
    bar.healthy_time_to_99 =
        TimeCheck(OrInf(c->healthy_time_to_99_s), healthy_times);
  }
  EvaluateRecovery(r.scenario.scenario, *c, &bar);
  bar.messages_per_delivery = c->messages_per_delivery;
  return bar;
}

std::vector<AggregatedBar> AggregateBars(
    const std::vector<std::vector<ScenarioBar>>& per_seed) {
  std::vector<AggregatedBar> out;
  if (per_seed.empty()) return out;
  out.resize(per_seed[0].size());
  for (size_t s = 0; s < per_seed.size(); ++s) {
    const bool first = s == 0;
    for (size_t i = 0; i < out.size() && i < per_seed[s].size(); ++i) {
      const ScenarioBar& b = per_seed[s][i];
      AggregatedBar& a = out[i];
      a.key = b.key;
      ++a.seeds;
      if (b.Passes()) ++a.seeds_passed;
      KeepWorst(b.delivered, b.seed, &a.delivered, first);
      KeepWorst(b.wasted, b.seed, &a.wasted, first);
      KeepWorst(b.time_to_99, b.seed, &a.time_to_99, first);
      KeepWorst(b.healthy_time_to_99, b.seed, &a.healthy_time_to_99, first);
      KeepWorst(b.given_up, b.seed, &a.given_up, first);
      KeepWorst(b.over_capacity, b.seed, &a.over_capacity, first);
      KeepWorst(b.recovery_to_100, b.seed, &a.recovery_to_100, first);
      KeepWorst(b.limit_target, b.seed, &a.limit_target, first);
      a.limit_enforced = a.limit_enforced || b.limit_enforced;
      a.messages_per_delivery =
          std::max(a.messages_per_delivery, b.messages_per_delivery);
    }
  }
  return out;
}

std::string FormatMatrixCsv(const std::vector<MatrixResult>& results) {
  std::string out = absl::StrCat(kMatrixCsvHeader, "\n");
  for (const MatrixResult& m : results) {
    for (const PolicyResult& r : m.rows) {
      absl::StrAppend(&out, m.scenario.key, ",", CsvCells(r), "\n");
    }
  }
  return out;
}

namespace {

// The grid: one line per scenario with its parameters, then what every
// scenario shares.
std::string GridMarkdown(const std::vector<MatrixResult>& results) {
  std::string out =
      "| Scenario | Deliveries | Endpoints | Workers | Horizon | Note |\n"
      "|---|---:|---|---|---:|---|\n";
  const Scenario* first = results.empty() ? nullptr
                                          : &results[0].scenario.scenario;
  for (const MatrixResult& m : results) {
    const Scenario& s = m.scenario.scenario;
    std::string note = m.scenario.note;
    // What differs from what every scenario shares (below the table).
    auto add = [&note](const std::string& what) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", what);
    };
    if (s.response_time != first->response_time) {
      add(absl::StrCat("answers take ", absl::FormatDuration(s.response_time)));
    }
    if (s.arrival_rate > 0) {
      add(absl::StrCat("created at ", Thousands(s.arrival_rate), "/s"));
    }
    if (s.max_attempts != first->max_attempts) {
      add(absl::StrCat("at most ", s.max_attempts, " attempts"));
    }
    if (std::optional<double> bound = CapacityBound(s)) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", "capacity x (horizon - ",
                      "recovery) = ", Thousands(*bound), " deliveries");
    }
    absl::StrAppend(&out, "| `", m.scenario.key, "` | ",
                    Thousands(s.subscriptions), " | ", DescribeEndpoints(s),
                    " | ",
                    s.concurrency > 0 ? Thousands(s.concurrency)
                                      : std::string("unlimited"),
                    " | ", absl::FormatDuration(s.horizon), " | ", note,
                    " |\n");
  }
  if (results.empty()) return out;
  const Scenario& s = results[0].scenario.scenario;
  absl::StrAppend(
      &out, "\nEvery scenario unless its note says otherwise: deliveries "
      "created at t=0; base ",
      absl::FormatDuration(s.base), ", cap ", absl::FormatDuration(s.cap),
      ", at most ", s.max_attempts, " attempts; answers take ",
      absl::FormatDuration(s.response_time), "; initial jitter ",
      absl::FormatDuration(s.initial_jitter),
      "; one worker process (retry budget) per 1,000 deliveries; the "
      "coordinated row on the engine's defaults, ", DescribeFleet(s),
      "; seed ", s.seed,
      ". Times to 99% are from the recovery (the end of the last down "
      "interval; for the recovery column, the end of the last Retry-After "
      "window if later); the healthy endpoints' from t=0.\n\n");
  return out;
}

std::string Seconds1(const std::optional<double>& t, const char* none) {
  return t ? absl::StrFormat("%.1f s", *t) : std::string(none);
}

}  // namespace

std::string FormatMatrixMarkdown(const std::vector<MatrixResult>& results) {
  std::string out = absl::StrCat(
      GridMarkdown(results),
      "| Scenario | Policy | Peak/s during outage | Peak/s after recovery | "
      "99% delivered after recovery | Healthy endpoints 99% (from t=0) | "
      "Wasted | Delivered | Given up | 99% after recovery or Retry-After | "
      "Limit | Messages/delivery |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const MatrixResult& m : results) {
    for (const PolicyResult& r : m.rows) {
      const bool ours = r.policy == Policy::kCoordinated;
      absl::StrAppend(
          &out, "| `", m.scenario.key, "` | ", PolicyKey(r.policy), " | ",
          Thousands(r.peak_rps_outage), " | ", Thousands(r.peak_rps_recovery),
          " | ", Seconds1(r.time_to_99_s, "never"), " | ",
          IsSharedPool(m.scenario.scenario)
              ? Seconds1(r.healthy_time_to_99_s, "never")
              : std::string("-"),
          " | ", Thousands(static_cast<double>(r.wasted_attempts)), " | ",
          Thousands(static_cast<double>(r.delivered)), " | ",
          Thousands(static_cast<double>(r.given_up)), " | ",
          Seconds1(r.recovery_to_99_s, "never"), " | ",
          Seconds1(r.limit_s, "no limit"), " | ",
          ours ? absl::StrFormat("%.2f", r.messages_per_delivery)
               : std::string("-"),
          " |\n");
    }
  }
  return out;
}

namespace {

struct Criterion {
  const char* name;
  const AggregatedBar::Worst* w;
  bool time;
};

// The criteria in print order: the bar's, then the limit target.
std::vector<Criterion> Criteria(const AggregatedBar& a) {
  return {{"delivered", &a.delivered, false},
          {"wasted_attempts", &a.wasted, false},
          {"time_to_99_s", &a.time_to_99, true},
          {"healthy_time_to_99_s", &a.healthy_time_to_99, true},
          {"given_up", &a.given_up, false},
          {"over_capacity", &a.over_capacity, false},
          {"recovery_to_100_s", &a.recovery_to_100, true},
          {"recovery_to_99_s", &a.limit_target, true}};
}

// "K of M": scenarios the limit target applies to (on some seed), and how
// many of those meet it on every seed.
std::pair<int, int> LimitCounts(const std::vector<AggregatedBar>& bars) {
  int applies = 0, met = 0;
  for (const AggregatedBar& a : bars) {
    if (!a.limit_target.check.applies) continue;
    ++applies;
    if (a.MeetsLimit()) ++met;
  }
  return {applies, met};
}

}  // namespace

std::string FormatBarCsv(const std::vector<AggregatedBar>& bars) {
  std::string out = absl::StrCat(kBarCsvHeader, "\n");
  int met = 0;
  for (const AggregatedBar& a : bars) {
    for (const auto& [name, w, time] : Criteria(a)) {
      if (!w->check.applies) continue;
      absl::StrAppend(&out, a.key, ",", name, ",",
                      Number(w->check.value, time), ",", Rule(w->check), ",",
                      Number(w->check.limit, time), ",",
                      Verdict(w->check.Passes()), ",", w->seed, ",",
                      w->seeds_passed, ",", a.seeds, "\n");
    }
    absl::StrAppend(&out, a.key, ",messages_per_delivery,",
                    absl::StrFormat("%.2f", a.messages_per_delivery), ",,,,,,",
                    a.seeds, "\n");
    absl::StrAppend(&out, a.key, ",bar,,,,", Verdict(a.Passes()), ",,",
                    a.seeds_passed, ",", a.seeds, "\n");
    if (a.Passes()) ++met;
  }
  const auto [applies, met_limit] = LimitCounts(bars);
  absl::StrAppend(&out,
                  "\nscenarios,meeting_bar,limit_applies,meeting_limit\n",
                  bars.size(), ",", met, ",", applies, ",", met_limit, "\n");
  return out;
}

namespace {

// One criterion's cell: "value <= limit PASS (k/n seeds; worst: seed s)".
std::string BarCell(const AggregatedBar::Worst& w, bool time, int seeds) {
  if (!w.check.applies) return "-";
  std::string c = absl::StrCat(
      ReadableNumber(w.check.value, time), " ",
      w.check.at_least ? "\xE2\x89\xA5" : "\xE2\x89\xA4", " ",
      std::isinf(w.check.limit) ? std::string("no limit")
                                : ReadableNumber(w.check.limit, time),
      " ", Verdict(w.check.Passes()));
  if (seeds > 1) {
    absl::StrAppend(&c, " (", w.seeds_passed, "/", seeds,
                    " seeds; worst: seed ", w.seed, ")");
  }
  return c;
}

// What the bar table's columns hold, printed under it.
constexpr char kBarLegend[] =
    "\nThe bar holds the coordinated row, on engine defaults, to these. "
    "Delivered >= best independent row - 0.1%. Wasted <= full jitter's / "
    "10. 99% delivered <= 1.1 x best jittered independent row + 1 s (no "
    "limit if no jittered row gets there). In shared-pool scenarios the "
    "same holds for the always-up endpoints' deliveries (from t=0). Nothing "
    "is given up where the fleet can be delivered before the horizon. Some "
    "endpoints have a limited capacity after their outage. For those, "
    "over-capacity answers (429 or 503 from the limiter while up) are <= 5% "
    "of the deliveries, or 10% if the limiter is shared with traffic the "
    "fleet cannot see. Where their backlog can finish, 100% are delivered "
    "after the recovery (or the last Retry-After window's end) within 1.5 x "
    "limit + 1 s. And 99% are within 1.2 x limit + 0.5 s. Elsewhere the 99% "
    "limit target is reported apart from the bar. \"-\" in the limit "
    "columns: no limit (the backlog cannot finish before the horizon, or "
    "deliveries keep arriving after the recovery). Messages/delivery: the "
    "coordinated row's calls and lease stream messages to and from the "
    "coordinator, per delivery (the most on any seed).\n";

}  // namespace

std::string FormatBarMarkdown(const std::vector<AggregatedBar>& bars) {
  const int seeds = bars.empty() ? 0 : bars[0].seeds;
  std::string out =
      "| Scenario | Delivered | Wasted attempts | 99% after recovery | "
      "Healthy endpoints 99% | Given up | Over-capacity answers | "
      "100% after recovery or Retry-After, against 1.5 x limit + 1 s | "
      "99% after recovery or Retry-After, against 1.2 x limit + 0.5 s | "
      "Bar | Messages/delivery |\n"
      "|---|---|---|---|---|---|---|---|---|---|---:|\n";
  int met = 0;
  for (const AggregatedBar& a : bars) {
    std::string limit = a.limit_target.check.applies
                            ? BarCell(a.limit_target, true, seeds)
                            : std::string("-");
    if (a.limit_target.check.applies && !a.limit_enforced) {
      absl::StrAppend(&limit, " (reported)");
    }
    absl::StrAppend(&out, "| `", a.key, "` | ",
                    BarCell(a.delivered, false, seeds), " | ",
                    BarCell(a.wasted, false, seeds), " | ",
                    BarCell(a.time_to_99, true, seeds), " | ",
                    BarCell(a.healthy_time_to_99, true, seeds), " | ",
                    BarCell(a.given_up, false, seeds), " | ",
                    BarCell(a.over_capacity, false, seeds), " | ",
                    BarCell(a.recovery_to_100, true, seeds), " | ", limit,
                    " | **", Verdict(a.Passes()), "**");
    if (seeds > 1) absl::StrAppend(&out, " (", a.seeds_passed, "/", seeds, ")");
    absl::StrAppend(&out, " | ",
                    absl::StrFormat("%.2f", a.messages_per_delivery), " |\n");
    if (a.Passes()) ++met;
  }
  const auto [applies, met_limit] = LimitCounts(bars);
  absl::StrAppend(&out, kBarLegend);
  const std::string every =
      seeds > 1 ? absl::StrCat(" on every one of ", seeds, " seeds")
                : std::string();
  absl::StrAppend(&out, "\n**", met, " of ", bars.size(),
                  " scenarios meet the whole bar", every, ".** Of the ",
                  applies, " whose backlog can finish, ", met_limit,
                  " meet the limit target", every, ".\n");
  return out;
}

}  // namespace stagger::sim
