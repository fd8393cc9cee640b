#include "server/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

#include <cstring>
#include <new>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/base/internal/raw_logging.h"
#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/backoff.h"
#include "server/engine/capacity_estimator.h"
#include "server/engine/circuit_breaker.h"
#include "server/engine/release_pacer.h"
#include "server/engine/retry_budget.h"

namespace stagger::engine {
namespace {

constexpr int kNumShards = 64;  // power of two
// Attempt numbers above this are bad input, whatever the policy says.
constexpr int kMaxAttemptNumber = 1000000;
// A delivery turned away while the breaker's probes are out waits at least
// this long before it asks again (even with deferral.spread = 0).
constexpr absl::Duration kMinHalfOpenWait = absl::Milliseconds(100);
// A full table sweeps a shard for idle endpoints at most this often.
constexpr absl::Duration kFullTableSweepInterval = absl::Seconds(1);
// A delivery whose wait would cross its deadline comes back within this
// long before the deadline, and then goes as a last-chance attempt.
constexpr absl::Duration kLastChanceWindow = absl::Seconds(1);

// A configuration that failed validation is a programming error here: the
// loader validates before it builds an engine.
void CheckValid(const EngineConfig& config) {
  const absl::Status s = ValidateEngineConfig(config);
  ABSL_RAW_CHECK(s.ok(), std::string(s.message()).c_str());
}

// The offset of the first byte that is not part of a well-formed UTF-8
// sequence (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), or npos.
// Keys travel as proto3 strings, which must be UTF-8; in-process callers
// (the client's local fallback, the simulator) get the same answer.
size_t InvalidUtf8At(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

// True if every byte of `key` is printable ASCII (0x20..0x7e): no control
// character and nothing UTF-8 needs checking. Eight bytes at a time: a byte
// b < 0x20 leaves its top bit set in (w - 0x2020..) & ~w, a byte b >= 0x7f
// in w | (w + 0x0101..). Both are exact for "some byte matches" (a borrow or
// carry only crosses a byte that already matched). The common case of a
// key; anything else takes the byte-by-byte checks.
bool IsPrintableAscii(absl::string_view key) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  const char* p = key.data();
  size_t n = key.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if ((((w - kOnes * 0x20) & ~w) | w | (w + kOnes)) & kHigh) return false;
  }
  for (; n > 0; --n, ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

int64_t Nanos(absl::Time t) { return absl::ToUnixNanos(t); }
absl::Time FromNanos(int64_t ns) { return absl::FromUnixNanos(ns); }

}  // namespace

// How one endpoint's parked deliveries come back: its learned pace and its
// release queue (capacity_estimator.h, release_pacer.h).
struct Engine::EndpointRelease {
  CapacityEstimator capacity;
  ReleasePacer pacer;
};

// Everything the engine remembers about one endpoint (168 bytes, with
// the key's length), followed by the endpoint's key in the same allocation
// (New()): the table holds one pointer per endpoint, and a lookup compares
// the key right next to the state. With a 51-byte key that is one 224-byte
// malloc chunk, plus 9 bytes of table per slot (pointer and control byte)
// at a load of 0.44..0.87. A scratch state (table full) lives on the stack
// and has no key.
struct Engine::EndpointState {
  int64_t last_seen_ns = 0;
  int64_t previous_delay_ns = 0;     // decorrelated jitter's state; 0 = none
  int64_t retry_after_until_ns = 0;  // fleet-wide Retry-After window end
  uint32_t config_generation = 0;    // generation policy_index refers to
  int32_t policy_index = -1;         // -1: default policy; else override
  CircuitBreaker breaker;
  RetryBudget budget;
  ServedRate served;
  // The release side (learned pace, release queue), allocated when the
  // endpoint's gate first closes: most endpoints never need it.
  std::unique_ptr<EndpointRelease> release;
  uint16_t key_size = 0;  // bytes, <= 4096 (limits.max_key_bytes)
  char key_head[6] = {};  // the key's first bytes; the rest follow

  absl::string_view key() const { return {key_head, key_size}; }

  // A tracked endpoint's state, holding a copy of `key`.
  static EndpointState* New(absl::string_view key) {
    // key_head is the last member, so the key's tail may run past the
    // end of the struct. (offsetof is not usable here: the members are
    // not standard-layout for every compiler, and clang refuses it.)
    const size_t bytes =
        sizeof(EndpointState) +
        (key.size() > sizeof(key_head) ? key.size() - sizeof(key_head) : 0);
    auto* st = new (::operator new(bytes)) EndpointState();
    st->key_size = static_cast<uint16_t>(key.size());
    std::memcpy(st->key_head, key.data(), key.size());
    return st;
  }
  static void Delete(EndpointState* st) {
    st->~EndpointState();
    ::operator delete(st);
  }
};

namespace {

// The table is a set of EndpointState pointers, hashed and compared by key
// (absl::string_view: a lookup allocates nothing). The hash is
// absl::Hash<absl::string_view>, as ShardFor's, so find() reuses it.
template <typename St>
struct KeyHash {
  using is_transparent = void;
  size_t operator()(absl::string_view k) const {
    return absl::Hash<absl::string_view>{}(k);
  }
  size_t operator()(const St* st) const { return (*this)(st->key()); }
};
template <typename St>
struct KeyEq {
  using is_transparent = void;
  static absl::string_view K(absl::string_view k) { return k; }
  static absl::string_view K(const St* st) { return st->key(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return K(a) == K(b);
  }
};

}  // namespace

struct Engine::CompiledConfig {
  EngineConfig config;
  uint32_t generation = 0;
  // The configuration this one replaced (one level only), so endpoints can
  // tell whether their windows' widths changed.
  std::shared_ptr<const CompiledConfig> previous;

  const PolicyParams& Policy(int index) const {
    return index < 0 ? config.default_policy : config.overrides[index].policy;
  }
  int Resolve(absl::string_view key) const {
    for (size_t i = 0; i < config.overrides.size(); ++i) {
      if (config.overrides[i].Matches(key)) return static_cast<int>(i);
    }
    return -1;
  }
  std::string PolicyName(int index) const {
    return index < 0 ? "default" : config.overrides[index].Name();
  }
};

struct alignas(64) Engine::Shard {
  mutable absl::Mutex mu;
  absl::flat_hash_set<EndpointState*, KeyHash<EndpointState>,
                      KeyEq<EndpointState>>
      map ABSL_GUARDED_BY(mu);  // owns the states (EndpointState::New)
  std::shared_ptr<const CompiledConfig> config ABSL_GUARDED_BY(mu);
  int64_t last_full_sweep_ns ABSL_GUARDED_BY(mu) = 0;
};

namespace {

void AddTransition(Decision* d, const BreakerTransition& t) {
  if (d->num_transitions < 2) d->transitions[d->num_transitions++] = t;
}

}  // namespace

Engine::Engine(EngineConfig config, const Clock* clock, RandomSource* random)
    : clock_(clock),
      random_(random),
      shards_(new Shard[kNumShards]),
      max_key_bytes_(config.limits.max_key_bytes),
      max_batch_size_(config.limits.max_batch_size) {
  CheckValid(config);
  for (auto& c : by_state_) c.store(0, std::memory_order_relaxed);
  auto compiled = std::make_shared<CompiledConfig>();
  compiled->config = std::move(config);
  compiled->generation = ++config_generation_;
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    shards_[i].config = compiled;
  }
}

Engine::~Engine() {
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    for (EndpointState* st : shards_[i].map) EndpointState::Delete(st);
    shards_[i].map.clear();
  }
}

Engine::Shard& Engine::ShardFor(absl::string_view key, size_t* hash) const {
  *hash = absl::Hash<absl::string_view>{}(key);
  // High bits pick the shard; the map uses its own (low) bits.
  return shards_[(*hash >> 48) & (kNumShards - 1)];
}

void Engine::SetConfig(EngineConfig config) {
  CheckValid(config);
  absl::MutexLock reload(&set_config_mu_);
  std::shared_ptr<const CompiledConfig> old;
  {
    absl::MutexLock l(&shards_[0].mu);
    old = shards_[0].config;
  }
  auto compiled = std::make_shared<CompiledConfig>();
  max_key_bytes_.store(config.limits.max_key_bytes, std::memory_order_relaxed);
  max_batch_size_.store(config.limits.max_batch_size,
                        std::memory_order_relaxed);
  compiled->config = std::move(config);
  compiled->generation = ++config_generation_;
  // Keep one level of history only.
  auto trimmed = std::make_shared<CompiledConfig>();
  trimmed->config = old->config;
  trimmed->generation = old->generation;
  compiled->previous = std::move(trimmed);
  std::shared_ptr<const CompiledConfig> shared = std::move(compiled);
  // Each shard switches under its own lock; a decision holds its shard's
  // lock from start to end, so it sees one configuration, old or new.
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    shards_[i].config = shared;
  }
}

EngineConfig Engine::config() const {
  absl::MutexLock l(&shards_[0].mu);
  return shards_[0].config->config;
}

absl::Status Engine::ValidateKey(absl::string_view key) const {
  if (key.empty()) {
    return absl::InvalidArgumentError("endpoint: must not be empty");
  }
  const int max = max_key_bytes_.load(std::memory_order_relaxed);
  if (key.size() > static_cast<size_t>(max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint: ", key.size(), " bytes, over the limit of ",
                     max, " (limits.max_key_bytes)"));
  }
  if (IsPrintableAscii(key)) return absl::OkStatus();  // the common case
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint: control character 0x", absl::Hex(c, absl::kZeroPad2),
          " at byte ", i));
    }
  }
  if (size_t bad = InvalidUtf8At(key); bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint: not valid UTF-8 at byte ", bad));
  }
  return absl::OkStatus();
}

absl::Status Engine::ValidateAdmit(const AdmitInput& in) const {
  if (absl::Status s = ValidateKey(in.endpoint); !s.ok()) return s;
  if (in.attempt < 1 || in.attempt > kMaxAttemptNumber) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attempt: must be in [1, ", kMaxAttemptNumber, "], got ", in.attempt));
  }
  return absl::OkStatus();
}

absl::Status Engine::ValidateReport(const ReportInput& in) const {
  if (absl::Status s = ValidateKey(in.endpoint); !s.ok()) return s;
  if (in.attempt < 1 || in.attempt > kMaxAttemptNumber) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attempt: must be in [1, ", kMaxAttemptNumber, "], got ", in.attempt));
  }
  const int o = static_cast<int>(in.outcome);
  if (o < static_cast<int>(Outcome::kSuccess) ||
      o > static_cast<int>(Outcome::kNotRetryable)) {
    return absl::InvalidArgumentError(
        absl::StrCat("outcome: unknown value ", o));
  }
  if (in.retry_after.has_value()) {
    const absl::Duration ra = *in.retry_after;
    if (ra < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "retry_after: must be >= 0, got ", absl::FormatDuration(ra)));
    }
    if (ra > kMaxRetryAfter) {
      return absl::InvalidArgumentError(
          absl::StrCat("retry_after: must be <= ",
                       absl::FormatDuration(kMaxRetryAfter), ", got ",
                       absl::FormatDuration(ra)));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The decision path. Everything in EngineDecider runs under the lock of the
// endpoint's shard; it is a friend so the header stays small.
class EngineDecider {
 public:
  using St = Engine::EndpointState;
  using Compiled = Engine::CompiledConfig;
  // Counted against the <= 256 B/endpoint target (bench/endpoint_memory).
  static_assert(sizeof(St) <= 256, "EndpointState grew");

  // Finds or creates the endpoint's state; re-resolves its policy after a
  // configuration change. `scratch` holds the state when the table is full.
  static St* Acquire(Engine& e, Engine::Shard& s, absl::string_view key,
                     size_t hash, absl::Time now, St* scratch,
                     const PolicyParams** policy,
                     bool* untracked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const Compiled& cfg = *s.config;
    St* st = nullptr;
    auto it = s.map.find(key, hash);
    if (it != s.map.end()) {
      st = *it;
    } else {
      const int64_t max = cfg.config.limits.max_endpoints;
      if (e.tracked_.load(std::memory_order_relaxed) >= max) {
        SweepFullShard(e, s, now);
      }
      if (e.tracked_.load(std::memory_order_relaxed) >= max) {
        *scratch = St();
        st = scratch;
        *untracked = true;
      } else {
        st = St::New(key);
        s.map.insert(st);
        e.tracked_.fetch_add(1, std::memory_order_relaxed);
        e.by_state_[static_cast<int>(BreakerState::kClosed)].fetch_add(
            1, std::memory_order_relaxed);
      }
      st->config_generation = 0;
    }
    if (st->config_generation != cfg.generation) {
      const int old_index = st->policy_index;
      const bool had_policy = st->config_generation != 0;
      st->policy_index = cfg.Resolve(key);
      const PolicyParams& np = cfg.Policy(st->policy_index);
      // Windows keep their counts only if their width is unchanged.
      const Compiled* prev = cfg.previous.get();
      const bool prev_known = had_policy && prev != nullptr &&
                              prev->generation == st->config_generation &&
                              (old_index < 0 || static_cast<size_t>(old_index) <
                                                    prev->config.overrides.size());
      if (had_policy) {
        if (!prev_known ||
            prev->Policy(old_index).budget.window != np.budget.window) {
          st->budget.Reset();
        }
      }
      st->config_generation = cfg.generation;
    }
    *policy = &cfg.Policy(st->policy_index);
    st->last_seen_ns = Nanos(now);
    return st;
  }

  static void SweepFullShard(Engine& e, Engine::Shard& s, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const int64_t t = Nanos(now);
    if (t - s.last_full_sweep_ns <
        absl::ToInt64Nanoseconds(kFullTableSweepInterval)) {
      return;
    }
    s.last_full_sweep_ns = t;
    e.SweepShardLocked(s, now);
  }

  static void Transition(Engine& e, bool untracked, Decision* d,
                         const CircuitBreaker::MaybeTransition& t) {
    if (!t.has_value()) return;
    AddTransition(d, *t);
    if (untracked) return;
    e.by_state_[static_cast<int>(t->from)].fetch_sub(1,
                                                     std::memory_order_relaxed);
    e.by_state_[static_cast<int>(t->to)].fetch_add(1,
                                                   std::memory_order_relaxed);
  }

  static absl::Duration HalfOpenWait(const PolicyParams& p) {
    return std::max(kMinHalfOpenWait, p.deferral.spread);
  }

  // The earlier of the caller's deadline and the policy's usefulness
  // horizon (InfiniteFuture if neither).
  static absl::Time Deadline(const PolicyParams& p, absl::Time deadline,
                             absl::Time first_attempt) {
    const absl::Duration horizon = p.backoff.horizon;
    if (horizon > absl::ZeroDuration() &&
        first_attempt != absl::InfinitePast()) {
      deadline = std::min(deadline, first_attempt + horizon);
    }
    return deadline;
  }

  // The gate is closed while the breaker is not CLOSED or the endpoint's
  // Retry-After window runs: failures then are the outage's, and parked
  // deliveries wait for the gate rather than for a slot.
  static bool GateClosed(const St& st, absl::Time now) {
    return st.breaker.state() != BreakerState::kClosed ||
           st.retry_after_until_ns > Nanos(now);
  }
  // Tells the capacity estimator whether the gate is open now.
  static void SyncGate(St& st, const PolicyParams& p, absl::Time now) {
    if (GateClosed(st, now)) {
      if (st.release == nullptr) {
        st.release = std::make_unique<Engine::EndpointRelease>();
      }
      st.release->capacity.OnGateClosed(now, st.served.PerSecond(now));
      st.release->pacer.OnGateClosed(now);
    } else if (st.release != nullptr) {
      st.release->capacity.OnGateOpened(p.deferral, now);
      st.release->pacer.OnGateOpened(now);
    }
  }
  // True while parked deliveries are coming back at the learned pace.
  static bool Releasing(const St& st, absl::Time now) {
    return st.release != nullptr && st.release->pacer.Releasing(now);
  }

  // The first gate: an operator's pause covering the endpoint. The
  // delivery is held until the pause ends, spread over deferral.spread
  // after it so the fleet does not come back at one instant; the
  // endpoint's state is not touched.
  static std::optional<Decision> Paused(const Engine& e, absl::string_view key,
                                        const PolicyParams& p, absl::Time now,
                                        absl::BitGenRef rng, int attempt,
                                        bool untracked) {
    const absl::Time until = e.pauses_.PausedUntil(key, now);
    if (until <= now) return std::nullopt;
    Decision d;
    d.untracked = untracked;
    d.attempt = attempt;
    Defer(&d, Reason::kPaused, until + UniformDuration(rng, p.deferral.spread));
    return d;
  }

  static void Defer(Decision* d, Reason r, absl::Time until) {
    d->verdict = Verdict::kDefer;
    d->reason = r;
    d->defer_until = until;
    d->delay = absl::ZeroDuration();
  }
  static void GiveUp(Decision* d, Reason r) {
    d->verdict = Verdict::kGiveUp;
    d->reason = r;
    d->delay = absl::ZeroDuration();
  }
  static void Proceed(Decision* d, Reason r, absl::Duration delay) {
    d->verdict = Verdict::kProceed;
    d->reason = r;
    d->delay = delay;
  }

  // A wait that would cross `deadline`. Come back inside the last
  // kLastChanceWindow before it and go then, through any gate (a
  // last-chance attempt, from Admit); give up if no attempt can start in
  // time, or if this failure already came back inside that window (the
  // delivery has had its last chance).
  static void LastChance(Decision* d, Reason r, absl::Time now,
                         absl::Time deadline, bool after_failure,
                         absl::BitGenRef rng) {
    const absl::Duration left = deadline - now;
    if (left <= absl::ZeroDuration() ||
        (after_failure && left <= kLastChanceWindow)) {
      GiveUp(d, Reason::kDeadline);
    } else if (left <= kLastChanceWindow) {
      Proceed(d, Reason::kLastChance, absl::ZeroDuration());
    } else {
      Defer(d, r, deadline - kLastChanceWindow +
                      UniformDuration(rng, kLastChanceWindow));
    }
  }

  // Parks the delivery until no earlier than `target` (release_pacer.h:
  // a slot on the queue for kPaced, a check-in otherwise), or gives it its
  // last chance if that is past its deadline.
  static void Park(Decision* d, St& st, const PolicyParams& p, Reason r,
                   absl::Time now, absl::Time target, absl::Time deadline,
                   bool after_failure, absl::BitGenRef rng) {
    Engine::EndpointRelease* rel = st.release.get();
    absl::Time back;
    if (rel == nullptr) {  // no release running: only check-ins happen
      back = ReleasePacer::OpenCheckIn(p.deferral, now, target, rng);
    } else if (r == Reason::kPaced) {
      back = rel->pacer.Queue(p.deferral, now, target,
                              rel->capacity.Pace(p.deferral),
                              rel->capacity.growing(), rng);
    } else {
      back = rel->pacer.CheckIn(p.deferral, now, target, rng);
    }
    if (back <= deadline) {
      Defer(d, r, back);
    } else {
      LastChance(d, r, now, deadline, after_failure, rng);
    }
  }

  static absl::Time BudgetTarget(const PolicyParams& p, absl::Time now) {
    // The budget frees up as the window slides: come back no sooner than
    // one slot from now (and at the endpoint's release pace).
    return now + p.budget.window / RetryBudget::kSlots;
  }

  static Decision Admit(Engine& e, St& st, const PolicyParams& p,
                        const AdmitInput& in, absl::Time now,
                        absl::BitGenRef rng, bool untracked) {
    Decision d;
    d.attempt = in.attempt;
    d.untracked = untracked;
    const bool retry = in.attempt > 1;
    const absl::Time deadline =
        Deadline(p, in.deadline, in.first_attempt_time);

    if (in.attempt > p.backoff.max_attempts) {
      GiveUp(&d, Reason::kAttemptsExhausted);
      return d;
    }
    if (now > deadline) {
      GiveUp(&d, Reason::kDeadline);
      return d;
    }
    Transition(e, untracked, &d, st.breaker.Refresh(p.breaker, now));
    SyncGate(st, p, now);
    if (st.breaker.state() == BreakerState::kOpen) {
      Park(&d, st, p, Reason::kCircuitOpen, now, st.breaker.open_until(),
           deadline, false, rng);
    } else if (retry && st.retry_after_until_ns > Nanos(now)) {
      Park(&d, st, p, Reason::kRetryAfterWindow, now,
           FromNanos(st.retry_after_until_ns), deadline, false, rng);
    } else if (retry && !st.budget.CanRetry(p.budget, now)) {
      Park(&d, st, p, Reason::kBudgetExhausted, now, BudgetTarget(p, now),
           deadline, false, rng);
    } else if (st.breaker.state() == BreakerState::kHalfOpen) {
      if (st.breaker.ProbeSlotFree(p.breaker, now)) {
        st.breaker.AcquireProbe();
        Proceed(&d, Reason::kHalfOpenProbe, absl::ZeroDuration());
      } else {
        Park(&d, st, p, Reason::kHalfOpenBusy, now, now + HalfOpenWait(p),
             deadline, false, rng);
      }
    } else if (Releasing(st, now) &&
               !st.release->pacer.TakeSlot(
                   now, st.release->capacity.Pace(p.deferral))) {
      Park(&d, st, p, Reason::kPaced, now, now, deadline, false, rng);
    } else if (!retry) {
      Proceed(&d, Reason::kInitialJitter,
              UniformDuration(rng, p.backoff.initial_jitter));
    } else {
      Proceed(&d, Reason::kAdmitted, absl::ZeroDuration());
    }
    // First attempts fund the budget when they go; a retry spends from it
    // only when it fails (Report), so a retry that succeeds costs nothing.
    if (!retry && d.verdict == Verdict::kProceed) {
      st.budget.RecordFirstAttempt(p.budget, now);
    }
    return d;
  }

  // The endpoint answered (a success, or a 4xx that shows it is up).
  static void OnAnswer(Engine& e, St& st, const PolicyParams& p,
                       absl::Time now, bool untracked, Decision* d) {
    Engine::EndpointRelease* rel = st.release.get();
    if (rel != nullptr && st.breaker.state() == BreakerState::kHalfOpen) {
      // The latest probe went out at open_until() (circuit_breaker.h).
      rel->capacity.SampleRtt(now - st.breaker.open_until());
    }
    Transition(e, untracked, d, st.breaker.OnAnswer(p.breaker, now));
    SyncGate(st, p, now);
    st.served.OnSuccess(now);
    if (rel != nullptr) {
      rel->capacity.OnSuccess(p.deferral, now, rel->pacer.backlog());
    }
  }

  static Decision Report(Engine& e, St& st, const PolicyParams& p,
                         const ReportInput& in, absl::Time now,
                         absl::BitGenRef rng, bool untracked) {
    Decision d;
    d.untracked = untracked;
    d.attempt = in.attempt;
    Transition(e, untracked, &d, st.breaker.Refresh(p.breaker, now));
    SyncGate(st, p, now);

    switch (in.outcome) {
      case Outcome::kSuccess:
        OnAnswer(e, st, p, now, untracked, &d);
        st.previous_delay_ns = 0;  // reset on success only, never by time
        d.verdict = Verdict::kDone;
        d.reason = Reason::kSucceeded;
        return d;
      case Outcome::kNotRetryable:
        // The endpoint answered: it is up, whatever it thought of us.
        OnAnswer(e, st, p, now, untracked, &d);
        GiveUp(&d, Reason::kNotRetryable);
        return d;
      case Outcome::kRetryableFailure:
      case Outcome::kTimeout:
      case Outcome::kRateLimited:
        break;
    }
    return ReportFailure(e, st, p, in, now, rng, untracked, d);
  }

  static Decision ReportFailure(Engine& e, St& st, const PolicyParams& p,
                                const ReportInput& in, absl::Time now,
                                absl::BitGenRef rng, bool untracked,
                                Decision d) {
    const absl::Time deadline =
        Deadline(p, in.deadline, in.first_attempt_time);
    // A 429 with Retry-After is the endpoint pacing us, not failing: it
    // does not feed the breaker. Without Retry-After it counts.
    const bool paced =
        in.outcome == Outcome::kRateLimited && in.retry_after.has_value();
    // A failure of an attempt the release queue let through while the gate
    // was open may say the pace is more than the endpoint takes.
    const bool releasing = Releasing(st, now);
    const bool released = releasing && !GateClosed(st, now) && !paced;
    CapacityEstimator::FailureSignal signal;
    if (st.release != nullptr) {
      signal = st.release->capacity.OnFailure(p.deferral, now, released);
    }
    const bool overload = signal.overload;
    d.pace_cut = signal.cut;
    // Remember the endpoint's Retry-After for the whole fleet: it is
    // information even if this delivery goes no further.
    if (in.retry_after.has_value()) {
      d.retry_after_seen = true;
      absl::Duration ra = *in.retry_after;
      if (ra > p.backoff.retry_after_max) {
        ra = p.backoff.retry_after_max;
        d.retry_after_clamped = true;
      }
      st.retry_after_until_ns =
          std::max(st.retry_after_until_ns, Nanos(now + ra));
    }
    // A failed retry is what the budget bounds: it spends now, unless it
    // was overload: the learned pace bounds that load (it is re-paced
    // below), and spending would stop the whole queue, successes included,
    // for a budget window.
    if (in.attempt > 1 && !overload) st.budget.RecordRetry(p.budget, now);
    // An overload failure is the pace's doing, not the endpoint being
    // down (it is serving): the breaker does not see it.
    if (!paced && !overload) {
      Transition(e, untracked, &d, st.breaker.OnFailure(p.breaker, now, rng));
    }
    SyncGate(st, p, now);

    d.attempt = in.attempt + 1;
    if (in.attempt >= p.backoff.max_attempts) {
      GiveUp(&d, Reason::kAttemptsExhausted);
      return d;
    }
    if (st.breaker.state() == BreakerState::kOpen) {
      Park(&d, st, p, Reason::kCircuitOpen, now, st.breaker.open_until(),
           deadline, true, rng);
      return d;
    }
    if (st.breaker.state() == BreakerState::kHalfOpen &&
        !st.breaker.ProbeSlotFree(p.breaker, now)) {
      Park(&d, st, p, Reason::kHalfOpenBusy, now, now + HalfOpenWait(p),
           deadline, true, rng);
      return d;
    }
    if (overload) {
      // The pace let more through than the endpoint takes: the retry waits
      // for the next slot on the release queue at the new pace, not for a
      // backoff on top of the queue's own load.
      Park(&d, st, p, Reason::kPaced, now, now, deadline, true, rng);
      return d;
    }
    if (!st.budget.CanRetry(p.budget, now)) {
      // Answer at once: no delay is computed for a retry that will not be
      // allowed, and the decorrelated state does not move.
      Park(&d, st, p, Reason::kBudgetExhausted, now, BudgetTarget(p, now),
           deadline, true, rng);
      return d;
    }

    absl::Duration delay = NextBackoff(
        p.backoff, in.attempt, absl::Nanoseconds(st.previous_delay_ns), rng);
    const absl::Duration policy_delay = delay;
    Reason reason = Reason::kBackoff;
    // The fleet-wide Retry-After (this report's, or one another worker
    // reported) wins over the computed delay; the retry lands spread after
    // the instant the endpoint named, not on it.
    const absl::Duration ra_left = FromNanos(st.retry_after_until_ns) - now;
    if (ra_left > absl::ZeroDuration() && ra_left >= delay) {
      delay = ra_left + UniformDuration(rng, p.deferral.spread);
      reason = Reason::kRetryAfter;
    }
    if (now + delay > deadline) {
      // Shortened to start before the deadline: the last chance, unless
      // this failure came back inside the last-chance window already.
      const absl::Duration left = deadline - now;
      if (left <= kLastChanceWindow) {
        GiveUp(&d, Reason::kDeadline);
        return d;
      }
      delay = left - kLastChanceWindow +
              UniformDuration(rng, kLastChanceWindow);
      reason = Reason::kLastChance;
    }
    // The decorrelated state grows from failures the endpoint did not
    // schedule itself: while its Retry-After window is in force, the window
    // paces the retries, and a burst of such reports must not push the
    // fleet's backoff to the cap.
    if (p.backoff.kind == BackoffKind::kDecorrelatedJitter &&
        ra_left <= absl::ZeroDuration()) {
      st.previous_delay_ns = absl::ToInt64Nanoseconds(policy_delay);
    }
    Proceed(&d, reason, delay);
    return d;
  }

  static EndpointSnapshot Snapshot(const Compiled& cfg, absl::string_view key,
                                   const St& st, absl::Time now) {
    EndpointSnapshot snap;
    snap.endpoint = std::string(key);
    const bool current = st.config_generation == cfg.generation;
    const int index = current ? st.policy_index : cfg.Resolve(key);
    snap.policy = cfg.PolicyName(index);
    const PolicyParams& p = cfg.Policy(index);
    snap.breaker_state = st.breaker.StateAt(now);
    if (snap.breaker_state == BreakerState::kOpen) {
      snap.open_until = st.breaker.open_until();
    }
    snap.consecutive_trips = st.breaker.trips();
    snap.consecutive_failures = st.breaker.consecutive_failures();
    if (st.breaker.state() == BreakerState::kHalfOpen) {
      snap.probes_in_flight = st.breaker.probes_in_flight();
      snap.probe_successes = st.breaker.probe_successes();
    }
    snap.previous_delay = absl::Nanoseconds(st.previous_delay_ns);
    RetryBudget budget = st.budget;  // reading advances the window: a copy
    snap.budget_remaining = budget.Remaining(p.budget, now);
    if (st.retry_after_until_ns > Nanos(now)) {
      snap.retry_after_until = FromNanos(st.retry_after_until_ns);
    }
    snap.last_seen = FromNanos(st.last_seen_ns);
    snap.served_per_second = st.served.PerSecond(now);
    if (const Engine::EndpointRelease* rel = st.release.get()) {
      const CapacityEstimator& c = rel->capacity;
      snap.has_release = true;
      snap.release_rate = c.Pace(p.deferral);
      snap.pace_source = c.source();
      snap.pace_capped = p.deferral.release_rate_per_second > 0 &&
                         snap.release_rate >= p.deferral.release_rate_per_second;
      snap.pace_phase = c.phase();
      snap.pace_threshold = c.threshold();
      snap.releasing = rel->pacer.Releasing(now);
      snap.backlog = rel->pacer.backlog();
      snap.round_trip = c.rtt();
    }
    return snap;
  }
};

// The part of Admit and Report around the decision itself: read the clock
// and the thread's generator, lock the endpoint's shard, find or create its
// state, then `decide(state, policy, now, rng, untracked)` under the lock.
template <typename Decide>
Decision Engine::WithEndpoint(absl::string_view endpoint, Decide decide) {
  const absl::Time now = clock_->Now();
  absl::BitGenRef rng = random_->Get();
  size_t hash;
  Shard& shard = ShardFor(endpoint, &hash);
  absl::MutexLock l(&shard.mu);
  EndpointState scratch;
  const PolicyParams* policy = nullptr;
  bool untracked = false;
  EndpointState* st = EngineDecider::Acquire(*this, shard, endpoint, hash, now,
                                             &scratch, &policy, &untracked);
  return decide(*st, *policy, now, rng, untracked);
}

absl::StatusOr<Decision> Engine::Admit(const AdmitInput& in) {
  if (absl::Status s = ValidateAdmit(in); !s.ok()) return s;
  return WithEndpoint(in.endpoint, [&](EndpointState& st,
                                       const PolicyParams& p, absl::Time now,
                                       absl::BitGenRef rng, bool untracked) {
    if (auto paused = EngineDecider::Paused(*this, in.endpoint, p, now, rng,
                                            in.attempt, untracked)) {
      return *paused;
    }
    return EngineDecider::Admit(*this, st, p, in, now, rng, untracked);
  });
}

absl::StatusOr<Decision> Engine::Report(const ReportInput& in) {
  if (absl::Status s = ValidateReport(in); !s.ok()) return s;
  return WithEndpoint(in.endpoint, [&](EndpointState& st,
                                       const PolicyParams& p, absl::Time now,
                                       absl::BitGenRef rng, bool untracked) {
    if (in.outcome != Outcome::kSuccess) {
      if (auto paused = EngineDecider::Paused(*this, in.endpoint, p, now, rng,
                                              in.attempt + 1, untracked)) {
        return *paused;
      }
    }
    return EngineDecider::Report(*this, st, p, in, now, rng, untracked);
  });
}

absl::StatusOr<EndpointSnapshot> Engine::Inspect(
    absl::string_view endpoint) const {
  if (absl::Status s = ValidateKey(endpoint); !s.ok()) return s;
  const absl::Time now = clock_->Now();
  size_t hash;
  Shard& shard = ShardFor(endpoint, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(endpoint, hash);
  if (it == shard.map.end()) {
    return absl::NotFoundError(
        absl::StrCat("endpoint: not tracked: \"", endpoint, "\""));
  }
  EndpointSnapshot snap =
      EngineDecider::Snapshot(*shard.config, endpoint, **it, now);
  snap.pause = pauses_.Find(endpoint, now);
  return snap;
}

ListPage Engine::List(absl::string_view after, int page_size,
                      std::optional<BreakerState> state) const {
  const absl::Time now = clock_->Now();
  page_size = std::max(1, page_size);
  // The page_size + 1 smallest matching keys above `after`, across shards
  // (a max-heap, so each shard is scanned once and only page-size keys are
  // copied).
  std::priority_queue<std::string> best;
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    for (const EndpointState* st_ptr : shards_[i].map) {
      const EndpointState& st = *st_ptr;
      const absl::string_view key = st.key();
      if (absl::string_view(key) <= after) continue;
      if (state.has_value() && st.breaker.StateAt(now) != *state) continue;
      if (best.size() > static_cast<size_t>(page_size)) {
        if (key >= best.top()) continue;
        best.pop();
      }
      best.push(std::string(key));
    }
  }
  std::vector<std::string> keys;
  while (!best.empty()) {
    keys.push_back(best.top());
    best.pop();
  }
  std::reverse(keys.begin(), keys.end());
  ListPage page;
  const bool more = keys.size() > static_cast<size_t>(page_size);
  if (more) keys.resize(page_size);
  for (const std::string& key : keys) {
    // Not Inspect(): that validates the key against the current
    // max_key_bytes, and an endpoint tracked before the limit was lowered
    // must still be listed (it is counted in total_tracked).
    size_t hash;
    Shard& shard = ShardFor(key, &hash);
    absl::MutexLock l(&shard.mu);
    auto it = shard.map.find(key, hash);
    if (it == shard.map.end()) continue;  // evicted since the scan
    page.endpoints.push_back(
        EngineDecider::Snapshot(*shard.config, key, **it, now));
    page.endpoints.back().pause = pauses_.Find(key, now);
  }
  if (more && !keys.empty()) page.next_after = keys.back();
  page.total_tracked = tracked_.load(std::memory_order_relaxed);
  return page;
}

int64_t Engine::SweepShardLocked(Shard& s, absl::Time now) {
  const int64_t idle =
      absl::ToInt64Nanoseconds(s.config->config.limits.idle_eviction);
  const int64_t cutoff = Nanos(now) - idle;
  int64_t evicted = 0;
  for (auto it = s.map.begin(); it != s.map.end();) {
    EndpointState* st = *it;
    if (st->last_seen_ns < cutoff) {
      by_state_[static_cast<int>(st->breaker.state())].fetch_sub(
          1, std::memory_order_relaxed);
      s.map.erase(it++);
      EndpointState::Delete(st);
      ++evicted;
    } else {
      ++it;
    }
  }
  tracked_.fetch_sub(evicted, std::memory_order_relaxed);
  evicted_total_.fetch_add(evicted, std::memory_order_relaxed);
  return evicted;
}

int64_t Engine::EvictIdle() {
  const absl::Time now = clock_->Now();
  int64_t evicted = 0;
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    evicted += SweepShardLocked(shards_[i], now);
  }
  return evicted;
}

absl::Status Engine::ResetEndpoint(absl::string_view endpoint) {
  if (absl::Status s = ValidateKey(endpoint); !s.ok()) return s;
  size_t hash;
  Shard& shard = ShardFor(endpoint, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(endpoint, hash);
  if (it == shard.map.end()) {
    return absl::NotFoundError(
        absl::StrCat("endpoint: not tracked: \"", endpoint, "\""));
  }
  EndpointState* st = *it;
  by_state_[static_cast<int>(st->breaker.state())].fetch_sub(
      1, std::memory_order_relaxed);
  shard.map.erase(it);
  EndpointState::Delete(st);
  tracked_.fetch_sub(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<EndpointSnapshot> Engine::ForceBreaker(
    absl::string_view endpoint, BreakerState to, absl::Duration open_for) {
  if (absl::Status s = ValidateKey(endpoint); !s.ok()) return s;
  if (to == BreakerState::kOpen && open_for <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("open_for: must be > 0");
  }
  if (to == BreakerState::kHalfOpen) {
    return absl::InvalidArgumentError("state: must be OPEN or CLOSED");
  }
  const absl::Time now = clock_->Now();
  size_t hash;
  Shard& shard = ShardFor(endpoint, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(endpoint, hash);
  if (it == shard.map.end()) {
    return absl::NotFoundError(
        absl::StrCat("endpoint: not tracked: \"", endpoint, "\""));
  }
  EndpointState& st = **it;
  const CompiledConfig& cfg = *shard.config;
  const PolicyParams& p =
      cfg.Policy(st.config_generation == cfg.generation ? st.policy_index
                                                        : cfg.Resolve(endpoint));
  Decision unused;
  EngineDecider::Transition(*this, /*untracked=*/false, &unused,
                            to == BreakerState::kOpen
                                ? st.breaker.ForceOpen(now + open_for)
                                : st.breaker.ForceClosed());
  EngineDecider::SyncGate(st, p, now);
  EndpointSnapshot snap = EngineDecider::Snapshot(cfg, endpoint, st, now);
  snap.pause = pauses_.Find(endpoint, now);
  return snap;
}

EngineStats Engine::Stats() const {
  EngineStats s;
  s.tracked = tracked_.load(std::memory_order_relaxed);
  s.evicted_total = evicted_total_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < by_state_.size(); ++i) {
    s.by_breaker_state[i] = by_state_[i].load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace stagger::engine
