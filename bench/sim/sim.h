// stagger-sim's core: a discrete-event simulation of a fleet of delivery
// workers retrying against endpoints that are down for a while and then
// recover, on a virtual clock.
//
// The model (Scenario):
//  - `subscriptions` deliveries are created at t=0 (or one every
//    1/arrival_rate s from t=0) and assigned to the scenario's endpoints by
//    share (smooth weighted round-robin: equal shares give 0, 1, 2, ..., 0,
//    1, 2, ...).
//  - Each endpoint has a failure schedule (a list of down intervals; one
//    interval [0, outage) is the default scenario's outage, several are a
//    flapping endpoint), a failure kind while down (500 = RETRYABLE_FAILURE, or
//    503 with Retry-After = RATE_LIMITED + retry_after), a share of attempts
//    that fail while up (a flaky endpoint), and a capacity while up
//    (attempts above it fail like an overloaded server's 503, no
//    Retry-After).
//  - A shared pool of `concurrency` workers (0 = unlimited) runs the
//    deliveries. A delivery takes a worker when it starts and queues for one
//    FIFO when none is free (in creation order; a parked delivery coming
//    back joins at the back). An independent client holds its worker
//    until it ends (its backoff sleeps happen in the worker's thread, as in
//    an in-process retry loop). A coordinated one holds it while it is
//    admitted, sending and reporting, and frees it on DEFER (the delivery is
//    parked) and at its end; see "The coordinated fleet" below for its
//    waits.
//
// The coordinated fleet (Policy::kCoordinated) drives one engine::Engine, on
// the engine's own defaults (DefaultCoordinatedPolicy), exactly as workers
// would through the client: Admit before every attempt, Report after it,
// each with the delivery's deadline (creation + horizon), first-attempt
// time (creation) and the admission token of the Admit that let it go.
//  - Waiting admission (Scenario::waiting_admission, the default; proto
//    AdmitRequest.wait): after a DEFER the delivery asks again at once with
//    wait = min(defer_for, engine::kMaxWait), and after a failure Report
//    answered PROCEED with delay d (BACKOFF or RETRY_AFTER) it asks
//    Admit(attempt + 1, wait = min(d, kMaxWait)) at once. A model of
//    staggerd's wait room (wait_room_model.h) holds those calls. A held call
//    holds no worker (the client keeps it as a pending call, as it keeps a
//    parked delivery's timer): when it is answered PROCEED the delivery
//    queues for a worker at the front of the line (its slot at the
//    endpoint's learned pace, or its probe, is now) and sends once it has
//    one; answered DEFER, it asks again at once. Without waiting admission
//    (the old client): a PROCEED delay is waited in the worker, and a DEFER
//    parks the delivery and Admits the same attempt again at defer_until.
//  - Agents with leases (Scenario::leases, agents > 0; core/lease/, lease
//    protocol 2): the deliveries are spread over the agents round-robin;
//    each agent keeps a lease::AgentLink (a copy of the coordinator's
//    not-clear set and one stream lease) and answers first attempts and
//    successes locally for every endpoint the set does not cover; the
//    coordinator is the engine plus a lease::ReplicaSync (lease_model.h
//    has the messages and their timing).
//  - A GIVE_UP dead-letters the delivery. One engine key per endpoint.
//
// Contract:
//  - No real time passes: events sit in a priority queue ordered by
//    (virtual time, insertion order) and the clock is set to each event's
//    time before it is handled. The clock never goes back (counted in
//    PolicyResult::clock_regressions, which is 0 unless this file is wrong).
//  - Deterministic: the same Scenario (including `seed`) gives bit-for-bit
//    the same PolicyResult. Every policy draws from its own generator,
//    seeded from (seed, policy), so adding a policy to a run does not change
//    the others' numbers.
//  - Independent policies (every Policy but kCoordinated) are per-process retry
//    clients: each delivery keeps its own backoff state and computes delays
//    with engine::NextBackoff (the engine's policy code), honours its own
//    Retry-After (above the delay, clamped to the cap), and gives up at the
//    attempt limit or the horizon (also before a first attempt that a busy pool
//    would start past it). kFullJitterBudget adds one engine::RetryBudget per
//    worker process (Scenario::workers processes, deliveries assigned
//    round-robin), asked when a retry is due: a refused retry is skipped (not
//    sent, not counted against the attempt limit) and the delivery waits for
//    its next backoff slot. They talk to no coordinator and see no lease.
//  - Nothing is lost: at the end every delivery is delivered or given up
//    with an engine::Reason (unfinished counts the ones still pending when
//    the max_virtual_time guard stopped the run; 0 in any sane scenario).
//
// Units: durations are absl::Duration; rates are attempts per second of
// virtual time; times in results are seconds since the recovery (the end of
// the last down interval of any endpoint, Recovery()), except
// healthy_time_to_99_s, first_trip_s and first_probe_s, which count from
// t=0, and recovery_to_99_s, from the recovery or the end of the last
// Retry-After window if later.
// stagger-sim --matrix runs a fixed grid of such scenarios (matrix.h).
// Simulations share nothing: separate ones may run on separate threads
// (RunMatrix does); one simulation is single-threaded.
#ifndef STAGGER_BENCH_SIM_SIM_H_
#define STAGGER_BENCH_SIM_SIM_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"
#include "core/lease/time_bounds.h"

namespace stagger::sim {

// One row of the table: how the fleet decides its retries.
enum class Policy : uint8_t {
  kNoBackoff = 0,         // retry as soon as the failure arrives
  kExponential = 1,       // base * 2^(n-1), capped, no jitter
  kEqualJitter = 2,       // v/2 + uniform(0, v/2)
  kFullJitter = 3,        // uniform(0, v)
  kDecorrelatedJitter = 4,  // min(cap, uniform(base, 3 * prev)), per client
  kFullJitterBudget = 5,  // full jitter + a retry budget per worker process
  kCoordinated = 6,       // every decision from one shared Stagger engine
};
inline constexpr int kNumPolicies = 7;
inline constexpr std::array<Policy, kNumPolicies> kAllPolicies = {
    Policy::kNoBackoff,          Policy::kExponential,
    Policy::kEqualJitter,        Policy::kFullJitter,
    Policy::kDecorrelatedJitter, Policy::kFullJitterBudget,
    Policy::kCoordinated};

// "no_backoff", "exponential", "equal_jitter", "full_jitter",
// "decorrelated_jitter", "full_jitter_budget", "coordinated" (CSV, flags).
const char* PolicyKey(Policy p);
// "No backoff (immediate retry)", ... (the Markdown table, the plot legend).
const char* PolicyTitle(Policy p);
std::optional<Policy> PolicyFromKey(absl::string_view key);

// The coordinated row's engine policy: the engine's own defaults
// (engine::PolicyParams{}, what staggerd embeds), untuned. The scenario's
// base, cap, max_attempts, horizon and initial_jitter overwrite its backoff
// (CoordinatedConfig): they are the deliveries' retry policy, the same for
// every row.
engine::PolicyParams DefaultCoordinatedPolicy();

// [start, end) of virtual time since t=0.
struct DownInterval {
  absl::Duration start;
  absl::Duration end;
};

// What limits an endpoint's capacity while it is up (EndpointSpec::
// capacity_per_second > 0). Either kind refills while the endpoint is down,
// so it is at its fullest at each recovery.
enum class LimiterKind : uint8_t {
  // A token bucket (nginx's limit_req, most API gateways): capacity tokens
  // a second, holding `burst`; an attempt takes one or is refused at once.
  kTokenBucket = 0,
  // A server with `servers` workers and a queue: each attempt is served in
  // servers / capacity seconds, first come first served, and waits for a
  // worker in the queue; its answer takes the wait and the service on top
  // of the round trip. An attempt that would wait longer than
  // `queue_timeout` is refused at once (503).
  kQueue = 1,
};
const char* LimiterKindName(LimiterKind k);  // "token bucket", ...

// What an attempt refused by the limiter is answered: 503 or 429 (both
// RATE_LIMITED, as the client maps them: client/http_outcome.h), with or
// without Retry-After (the seconds until it has room for one attempt) and
// RateLimit-Reset (draft-ietf-httpapi-ratelimit-headers-06: the seconds
// until its quota is back, a token bucket full), both whole seconds rounded
// up, at least 1.
struct RefusalSpec {
  int status = 503;  // 429 or 503
  bool retry_after = false;
  bool ratelimit_reset = false;
};

// One endpoint the fleet delivers to.
struct EndpointSpec {
  // When the endpoint fails every attempt: sorted, disjoint, non-empty
  // intervals (none: always up).
  std::vector<DownInterval> down;
  // What it answers while down: 0 = a plain failure (500,
  // RETRYABLE_FAILURE); > 0 = 503 with this Retry-After (RATE_LIMITED).
  // down_rate_limited: 503 without Retry-After (RATE_LIMITED) instead of
  // 500 (nginx's `return 503` for an upstream that is down).
  absl::Duration down_retry_after = absl::ZeroDuration();
  bool down_rate_limited = false;
  // While up, at most this many attempts per second succeed, through the
  // limiter `limiter` (by default today's token bucket holding 100 ms
  // worth). 0 = unlimited.
  double capacity_per_second = 0;
  LimiterKind limiter = LimiterKind::kTokenBucket;
  // kTokenBucket: tokens it holds (0: 100 ms of capacity, at least 1).
  double burst = 0;
  // kQueue: workers (>= 1) and the longest wait in the queue.
  int servers = 1;
  absl::Duration queue_timeout = absl::Seconds(1);
  // How the limiter refuses an attempt.
  RefusalSpec refusal;
  // Traffic the fleet cannot see, sharing the limiter (kTokenBucket): this
  // many requests a second, evenly spaced from t=0, each taking a token
  // when there is one, while the endpoint is up. 0 = none.
  double hidden_per_second = 0;
  // While up, this share of the attempts it receives fail (500), spread
  // evenly: the k-th attempt received while up fails iff
  // floor(k * share) > floor((k - 1) * share), so every run of attempts
  // fails in that share (within one). 0..1 (exclusive); 0 = never.
  double up_failure_share = 0;
  // While down, this share of the attempts fail (with the down failure
  // kind), spread evenly the same way; the others are served as while up.
  // (0, 1]; 1 = every attempt (an outage), < 1: a degraded endpoint.
  double down_failure_share = 1;
  // Relative share of the deliveries, > 0.
  double share = 1;

  // What the fleet can have of the capacity while up: capacity_per_second
  // less the hidden traffic (0: unlimited).
  double FleetCapacity() const;
  // The limiter's burst in attempts (kTokenBucket: burst, or 100 ms worth;
  // kQueue: the servers plus the queue).
  double BurstAttempts() const;
};

// An endpoint down in [0, outage) (none if outage is 0), then up.
EndpointSpec OutageEndpoint(absl::Duration outage, double capacity_per_second = 0,
                            absl::Duration down_retry_after = absl::ZeroDuration());
// `cycles` down intervals of `down`, `up` apart, the first at t=0:
// [0, down), [down + up, 2 down + up), ...
std::vector<DownInterval> Flapping(absl::Duration down, absl::Duration up,
                                   int cycles);

// The coordinated fleet's agents (stagger-agent) and their leases
// (core/lease/, lease protocol 2; proto/stagger/v1/sync.proto). Defaults:
// four agents, the agent's flush interval (500 ms), 1 ms one way between an
// agent and the coordinator (a local network), staggerd's --lease_ttl
// default (5 s).
struct LeaseModel {
  // 0: no agents (every decision is a call to the coordinator), else
  // 1..1000; deliveries go to agents round-robin.
  int agents = 4;
  // Each agent sends its counts and renews its stream lease this often
  // (10 ms..1 min); agent a first at (a + 1) / agents of it.
  absl::Duration flush_interval = lease::kDefaultFlushInterval;
  // One way, agent -> coordinator and coordinator -> agent (0..10 s).
  absl::Duration push_latency = absl::Milliseconds(1);
  // The stream leases' time to live (1 s..10 min, --lease_ttl's range).
  absl::Duration ttl = absl::Seconds(5);
  // The first `deaf_agents` agents' streams go quiet at the first set
  // change that takes keys out of clear: nothing passes either way from
  // then on, so they neither apply nor acknowledge it, and their leases
  // end only with their ttl (lease_model.h).
  int deaf_agents = 0;
};

// The experiment. Its defaults are the default scenario (docs/SIMULATOR.md,
// "The default scenario"): 10,000 deliveries created at t=0, one endpoint down
// in [0, 20 s), then instantly healthy, no limit on concurrent workers. Four
// attempts cannot outlast a 20 s outage at base 200 ms (they end within ~3 s),
// so deliveries are bounded by a usefulness horizon (120 s) and a generous
// attempt limit (50) instead: enough for every backoff policy to reach the
// recovery, not for immediate retries (50 attempts x 250 ms = 12.5 s), which
// never deliver.
struct Scenario {
  int subscriptions = 10000;                   // deliveries, 1..10,000,000
  // Deliveries created per second, from t=0 (delivery i at i / rate);
  // 0 = all at t=0.
  double arrival_rate = 0;
  // 1..1000 endpoints; deliveries are assigned by share.
  std::vector<EndpointSpec> endpoints = {OutageEndpoint(absl::Seconds(20))};
  // Workers shared by every delivery: 0 = unlimited (one per delivery),
  // else 1..10,000,000. See the model above for who holds one when.
  int concurrency = 0;
  absl::Duration base = absl::Milliseconds(200);  // backoff base
  absl::Duration cap = absl::Seconds(30);         // backoff cap
  // Attempts per delivery, counting the first (1..100, the engine's range).
  int max_attempts = 50;
  // Usefulness horizon: a retry (or a deferral) that would land later than
  // this after the delivery was created gives up with DEADLINE. 0 = none.
  absl::Duration horizon = absl::Seconds(120);
  // Time from sending an attempt to its answer, success or failure. 250 ms:
  // a slow failing endpoint (10,000 clients retrying without backoff then
  // send 40,000 attempts/s, the table's first row).
  absl::Duration response_time = absl::Milliseconds(250);
  // First attempts are sent uniformly within [0, initial_jitter) of
  // the delivery's start (every policy; the coordinated engine draws it
  // itself).
  absl::Duration initial_jitter = absl::Milliseconds(50);
  // Worker processes; kFullJitterBudget keeps one retry budget per process.
  int workers = 10;
  // What kFullJitterBudget's per-process budgets count as spending. Both
  // check the budget before the backoff sleep and again before sending.
  enum class BudgetAccounting : uint8_t {
    kEveryRetry,     // a retry spends when sent (Finagle's; the default)
    kFailedRetries,  // a retry spends when its failure comes back
  };
  BudgetAccounting budget_accounting = BudgetAccounting::kEveryRetry;
  // Rate measurement: attempts are counted in buckets of this width.
  absl::Duration bucket = absl::Seconds(1);
  // "Peak at recovery" is the highest bucket in [Recovery, Recovery + this).
  absl::Duration recovery_window = absl::Seconds(10);
  // "Peak during the outage" is the highest bucket in [opening_wave,
  // Recovery). The opening wave is every delivery's first attempt plus the
  // retries whose intervals are still shorter than a bucket; at that
  // resolution a synchronised herd and a dispersed crowd look alike, so its
  // peak is reported separately (PolicyResult::peak_rps_opening).
  // nullopt: OpeningWave(*this).
  std::optional<absl::Duration> opening_wave;
  // Safety stop: a run that has not settled by this virtual time ends, and
  // what is still pending is reported as unfinished.
  absl::Duration max_virtual_time = absl::Hours(2);
  uint64_t seed = 1;

  // The coordinated fleet's client: waiting admission (false: the old
  // client, which sleeps its PROCEED delays in the worker and re-Admits a
  // parked delivery at defer_until) and agents with leases.
  bool waiting_admission = true;
  LeaseModel leases;

  // The coordinated row's engine policy, and the retry budget parameters
  // of kFullJitterBudget. backoff.{base, cap, max_attempts, horizon,
  // initial_jitter} are overwritten from the fields above.
  engine::PolicyParams engine_policy = DefaultCoordinatedPolicy();
};

// The end of the last down interval of any endpoint (0 if none is ever
// down): "the recovery" that time_to_99_s and the peaks are measured from.
absl::Duration Recovery(const Scenario& s);

// True if some endpoint is never down and another one is at some point:
// then healthy_time_to_99_s says how the down one held the others back.
bool MixesHealthyAndDown(const Scenario& s);

// Which endpoint each delivery goes to (size subscriptions), by share.
std::vector<int> AssignEndpoints(const Scenario& s);

// OK, or every range error (one per line, each naming the field).
absl::Status ValidateScenario(const Scenario& s);

// The opening wave's length: s.opening_wave if set, else the time plain
// exponential backoff takes to send and hear back from every retry whose
// interval is shorter than s.bucket, rounded up to a whole bucket (3 s for
// the defaults: retries 0.2, 0.4 and 0.8 s apart, 250 ms answers).
absl::Duration OpeningWave(const Scenario& s);

// The engine configuration the coordinated row runs with.
engine::EngineConfig CoordinatedConfig(const Scenario& s);

// What happened to one delivery, for tests and tracing.
struct TraceEvent {
  enum class Kind : uint8_t {
    kAttempt,
    kDelivered,
    kGaveUp,
    kTookWorker,   // the delivery got a worker (from the pool)
    kFreedWorker,  // ... and gave it back (end, coordinated DEFER, or a
                   // coordinated wait held by the coordinator)
  };
  Kind kind = Kind::kAttempt;
  int64_t time_ns = 0;  // virtual, since t=0
  int delivery = 0;     // 0..subscriptions-1
  int endpoint = 0;     // index in Scenario::endpoints
  int attempt = 0;      // kAttempt: 1, 2, ...
  bool failed = false;  // kAttempt: the endpoint was down or overloaded
  engine::Reason reason = engine::Reason::kSucceeded;  // kGaveUp
};
using TraceFn = std::function<void(const TraceEvent&)>;

struct PolicyResult {
  Policy policy = Policy::kNoBackoff;
  // The table's columns.
  double peak_rps_outage = 0;    // highest bucket in [opening, outage), /s
  double peak_rps_recovery = 0;  // highest bucket in the recovery window, /s
  // Recovery(s) -> 99% of every delivery delivered; 0 if that came before
  // the recovery (in a flapping endpoint's up windows); none: never.
  std::optional<double> time_to_99_s;
  // The same from the recovery or, if later, the end of the last
  // Retry-After window the endpoints gave this row (its answer's arrival +
  // Retry-After); 0 if 99% came before; none: never.
  std::optional<double> recovery_to_99_s;
  // The fastest any fleet could have done recovery_to_99_s from where this
  // row stood then (limit.h); none if that would end past the horizon (the
  // backlog cannot finish).
  std::optional<double> limit_s;
  int64_t wasted_attempts = 0;  // retries (attempt >= 2) that failed
  int64_t delivered = 0;
  int64_t given_up = 0;
  // Over-capacity answers: attempts (first or retry) a serving endpoint's
  // limiter refused (429 or 503 while up), the fleet's only.
  int64_t over_capacity = 0;
  // From the recovery (or the end of the last Retry-After window, as
  // recovery_to_99_s) to the last delivery delivered; 0 if every delivery
  // was delivered before; none if some delivery was given up or unfinished.
  std::optional<double> recovery_to_100_s;

  double peak_rps_opening = 0;   // highest bucket in [0, opening wave), /s
  // 99% of the deliveries to endpoints that are never down delivered,
  // seconds since t=0 (not since the recovery). None: never, or no
  // endpoint is always up.
  std::optional<double> healthy_time_to_99_s;

  // Accounting behind them.
  int64_t attempts = 0;              // every attempt sent, each counted once
  int64_t first_attempts = 0;        // attempt 1
  int64_t failed_first_attempts = 0;  // attempt 1 that failed
  int64_t unfinished = 0;            // pending at max_virtual_time
  std::array<int64_t, engine::kMaxReason + 1> given_up_by_reason{};
  std::vector<int64_t> attempts_per_bucket;  // [i]: in [i*bucket, (i+1)*bucket)
  // The same for the attempts that succeeded and the over-capacity answers,
  // each counted when the attempt reached the endpoint (what an access log
  // shows).
  std::vector<int64_t> successes_per_bucket;
  std::vector<int64_t> over_capacity_per_bucket;
  // Per endpoint, in Scenario::endpoints order.
  struct PerEndpoint {
    int64_t deliveries = 0;  // assigned to it
    int64_t delivered = 0;
    int64_t given_up = 0;
    int64_t attempts = 0;
    int64_t wasted_attempts = 0;
    int64_t over_capacity = 0;
  };
  std::vector<PerEndpoint> per_endpoint;
  // Worker pool: the most deliveries waiting for a worker at once.
  int64_t peak_waiting_for_worker = 0;
  // Coordinated only: calls to the coordinator (Admit, waiting or not;
  // Report) and what they answered.
  int64_t admits = 0;
  int64_t reports = 0;
  int64_t deferrals = 0;
  std::array<int64_t, engine::kMaxReason + 1> deferred_by_reason{};
  // Waiting admission: Admits with a wait, how many the wait room held,
  // and how those ended (released before their wait ran out, or at it).
  int64_t waiting_admits = 0;
  int64_t held = 0;
  int64_t released = 0;
  int64_t expired = 0;
  int64_t peak_held = 0;
  // Leases: decisions the agents took locally, lease stream messages each
  // way, stream lease renewals granted, and not-clear set changes pushed
  // (one per agent stream).
  int64_t local_admits = 0;
  int64_t local_reports = 0;
  int64_t sync_up = 0;
  int64_t sync_down = 0;
  int64_t lease_renewals = 0;
  int64_t set_pushes = 0;
  // Messages to or from the coordinator: admits + reports + sync_up +
  // sync_down (a unary call counts 1, a stream message 1), and that per
  // delivery.
  int64_t coordinator_messages = 0;
  double messages_per_delivery = 0;
  // The first breaker trip (CLOSED -> OPEN) of any endpoint, and the first
  // half-open probe admitted after it; seconds since t=0.
  std::optional<double> first_trip_s;
  std::optional<double> first_probe_s;
  int64_t trips = 0;
  // The coordinated row with the disable option on (engine_policy.disable):
  // the first GIVE_UP(ENDPOINT_DISABLED), seconds since t=0 (the engine
  // disables the endpoint at the decision that answers it), and the
  // attempts sent from then on (0: nothing reached a disabled endpoint).
  std::optional<double> disabled_s;
  int64_t attempts_after_disable = 0;
  // Sanity: events handled, and times the clock would have gone back.
  int64_t events = 0;
  int64_t clock_regressions = 0;
  double settled_s = 0;  // virtual time the last delivery ended
};

// Runs one policy. `trace`, if set, sees every attempt, delivery and give-up
// in virtual-time order. Errors: an invalid scenario, or the engine
// refusing an input the simulator built (a bug; the message says which).
absl::StatusOr<PolicyResult> Simulate(const Scenario& s, Policy p,
                                      const TraceFn& trace = nullptr);

// Runs `policies` in order (each independently seeded).
absl::StatusOr<std::vector<PolicyResult>> SimulateAll(
    const Scenario& s, const std::vector<Policy>& policies);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_SIM_H_
