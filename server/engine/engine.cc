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
#include "server/engine/circuit_breaker.h"
#include "server/engine/retry_budget.h"

namespace stagger::engine {
namespace {

constexpr int kNumShards = 64;  // power of two
// Attempt numbers above this are bad input, whatever the policy says.
constexpr int kMaxAttemptNumber = 1000000;
// A deferral is never scheduled further than this past its target instant,
// however long the release queue of the endpoint has grown.
constexpr absl::Duration kMaxDeferLead = absl::Minutes(10);
// A delivery turned away while the breaker's probes are out waits at least
// this long before it asks again (even with deferral.spread = 0).
constexpr absl::Duration kMinHalfOpenWait = absl::Milliseconds(100);
// A full table sweeps a shard for idle endpoints at most this often.
constexpr absl::Duration kFullTableSweepInterval = absl::Seconds(1);
// The adaptive release pace (AIMD; EndpointState::release_fraction):
// it never drops below this fraction of deferral.release_rate_per_second
// (nor below 1/s),
constexpr double kMinReleaseFraction = 1.0 / 64;
// halves at most once per round, a round lasting at least this long
// (failures of attempts sent before a cut keep arriving for a response
// time; they are the same signal),
constexpr int64_t kReleaseRoundMinMs = 500;
constexpr double kReleaseCutFactor = 0.5;
// and, once the round is over, grows back by this fraction of the maximum
// per second: from half to full in 10 s, slow enough that probing above
// the endpoint's capacity costs a few failures per cycle.
constexpr double kReleaseIncreasePerSecond = 1.0 / 20;
// EndpointState::release_fraction's unit: 1/32768 of the maximum (exact
// halvings down to the floor, 512).
constexpr double kReleaseFractionOne = 32768;

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

// Everything the engine remembers about one endpoint (158 bytes, with
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
  int64_t release_cursor_ns = 0;     // next free release slot for deferrals
  uint32_t config_generation = 0;    // generation policy_index refers to
  int32_t policy_index = -1;         // -1: default policy; else override
  // The adaptive release pace (AIMD), as a fraction of
  // deferral.release_rate_per_second in 1/32768ths (0 = not adapted: the
  // maximum), never below kMinReleaseFraction: halved once per round on a
  // failure while the breaker is CLOSED and the release queue is backed
  // up; after the round, grows additively with time.
  uint16_t release_fraction = 0;
  // A deferral waited behind an earlier one (the cursor was past its
  // target) since the queue last drained: a backlog is being released.
  uint8_t release_backed_up = 0;
  // The current round's end (see CutReleaseRate), Unix ms mod 2^32.
  uint32_t release_round_end_ms = 0;
  CircuitBreaker breaker;
  RetryBudget budget;
  uint16_t key_size = 0;  // bytes, <= 4096 (limits.max_key_bytes)
  char key_head[6] = {};  // the key's first bytes; the rest follow

  absl::string_view key() const { return {key_head, key_size}; }

  // A tracked endpoint's state, holding a copy of `key`.
  static EndpointState* New(absl::string_view key) {
    static_assert(std::is_standard_layout<EndpointState>::value,
                  "offsetof(key_head) must be well defined");
    const size_t bytes = std::max(
        sizeof(EndpointState), offsetof(EndpointState, key_head) + key.size());
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
  static_assert(sizeof(St) <= 176, "EndpointState grew");

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

  // The endpoint's adapted release pace, deliveries/s, in the current
  // policy's [floor, max] (the policy may have changed since the last cut):
  // the rate set by the last cut, held until that cut's round ends, then
  // growing by kReleaseIncreasePerSecond * max per second.
  static double ReleaseMax(const PolicyParams& p) {
    return p.deferral.release_rate_per_second;
  }
  static double ReleaseFloor(const PolicyParams& p) {
    return std::max(1.0, ReleaseMax(p) * kMinReleaseFraction);
  }
  static uint32_t Millis32(absl::Time t) {
    return static_cast<uint32_t>(absl::ToUnixMillis(t));  // mod 2^32
  }
  // now - the current round's end, in ms (negative: the round goes on).
  static int32_t SinceRoundEndMs(const St& st, absl::Time now) {
    return static_cast<int32_t>(Millis32(now) - st.release_round_end_ms);
  }
  static double ReleaseRate(const St& st, const PolicyParams& p,
                            absl::Time now) {
    const double max = ReleaseMax(p);
    if (st.release_fraction == 0) return max;  // not adapted
    double rate = max * st.release_fraction / kReleaseFractionOne;
    const int32_t since = SinceRoundEndMs(st, now);
    if (since > 0) rate += kReleaseIncreasePerSecond * max * since / 1000.0;
    return std::clamp(rate, ReleaseFloor(p), max);
  }
  // Back at max: forget the adaptation, so the 32-bit round end never
  // outlives its wrap-around.
  static void ForgetReleaseRateIfRecovered(St& st, const PolicyParams& p,
                                           absl::Time now) {
    if (st.release_fraction != 0 &&
        ReleaseRate(st, p, now) >= ReleaseMax(p)) {
      st.release_fraction = 0;
    }
  }
  // True while a backlog of deferred deliveries is still booked for
  // release (one deferral waiting behind another; a lone deferral, e.g. a
  // single Retry-After or budget wait, is not a queue).
  static bool Releasing(const St& st, absl::Time now) {
    return st.release_backed_up != 0 && st.release_cursor_ns > Nanos(now);
  }
  // Multiplicative decrease, once per round: a failure while the breaker is
  // CLOSED and the queue is releasing says the pace is more than the
  // endpoint can take. The round lasts until the deliveries booked before
  // this cut have come back (the release cursor now), at least
  // kReleaseRoundMinMs: their failures are the old pace's, not the new one's.
  static void CutReleaseRate(St& st, const PolicyParams& p, absl::Time now) {
    if (st.release_fraction != 0 && SinceRoundEndMs(st, now) < 0) return;
    const double rate =
        std::max(ReleaseFloor(p), ReleaseRate(st, p, now) * kReleaseCutFactor);
    const long fraction =
        std::lround(rate / ReleaseMax(p) * kReleaseFractionOne);
    st.release_fraction = static_cast<uint16_t>(
        std::clamp(fraction, 1L, static_cast<long>(kReleaseFractionOne)));
    const int64_t end_ns = std::max(Nanos(now) + kReleaseRoundMinMs * 1000000,
                                    st.release_cursor_ns);
    st.release_round_end_ms = Millis32(FromNanos(end_ns));
  }

  // Schedules a deferred delivery's return to no earlier than `target`,
  // on the endpoint's release queue at its adapted pace: consecutive
  // deferrals take slots 1/rate apart, each spread uniformly over
  // [slot, slot + spread), so a parked herd comes back as a ramp, not a
  // spike.
  static absl::Time DeferTo(St& st, const PolicyParams& p, absl::Time now,
                            absl::Time target, absl::BitGenRef rng) {
    ForgetReleaseRateIfRecovered(st, p, now);
    const double rate = std::max(ReleaseRate(st, p, now), 1e-3);
    const int64_t slot_ns =
        std::max<int64_t>(1, static_cast<int64_t>(1e9 / rate));
    if (st.release_cursor_ns <= Nanos(now)) st.release_backed_up = 0;
    if (st.release_cursor_ns > Nanos(target)) st.release_backed_up = 1;
    int64_t cursor = std::max(st.release_cursor_ns, Nanos(target));
    cursor = std::min(cursor, Nanos(target + kMaxDeferLead));
    st.release_cursor_ns = cursor + slot_ns;
    return FromNanos(cursor) + UniformDuration(rng, p.deferral.spread);
  }

  static absl::Duration HalfOpenWait(const PolicyParams& p) {
    return std::max(kMinHalfOpenWait, p.deferral.spread);
  }

  static bool PastDeadline(const PolicyParams& p, absl::Time when,
                           absl::Time deadline, absl::Time first_attempt) {
    if (when > deadline) return true;
    const absl::Duration horizon = p.backoff.horizon;
    return horizon > absl::ZeroDuration() &&
           first_attempt != absl::InfinitePast() &&
           when > first_attempt + horizon;
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

  // A deferral, unless the delivery's deadline is before it.
  static void DeferOrGiveUp(Decision* d, const PolicyParams& p, Reason r,
                            absl::Time until, absl::Time deadline,
                            absl::Time first_attempt) {
    if (PastDeadline(p, until, deadline, first_attempt)) {
      GiveUp(d, Reason::kDeadline);
    } else {
      Defer(d, r, until);
    }
  }

  static Decision Admit(Engine& e, St& st, const PolicyParams& p,
                        const AdmitInput& in, absl::Time now,
                        absl::BitGenRef rng, bool untracked) {
    Decision d;
    d.attempt = in.attempt;
    d.untracked = untracked;
    const bool retry = in.attempt > 1;

    if (in.attempt > p.backoff.max_attempts) {
      GiveUp(&d, Reason::kAttemptsExhausted);
      return d;
    }
    if (PastDeadline(p, now, in.deadline, in.first_attempt_time)) {
      GiveUp(&d, Reason::kDeadline);
      return d;
    }
    Transition(e, untracked, &d, st.breaker.Refresh(p.breaker, now));
    if (st.breaker.state() == BreakerState::kOpen) {
      DeferOrGiveUp(&d, p, Reason::kCircuitOpen,
                    DeferTo(st, p, now, st.breaker.open_until(), rng),
                    in.deadline, in.first_attempt_time);
      return d;
    }
    if (retry && st.retry_after_until_ns > Nanos(now)) {
      DeferOrGiveUp(&d, p, Reason::kRetryAfterWindow,
                    DeferTo(st, p, now, FromNanos(st.retry_after_until_ns),
                            rng),
                    in.deadline, in.first_attempt_time);
      return d;
    }
    if (retry && !st.budget.CanRetry(p.budget, now)) {
      DeferBudget(st, p, now, rng, in.deadline, in.first_attempt_time, &d);
      return d;
    }
    const bool probe = st.breaker.state() == BreakerState::kHalfOpen;
    if (probe) {
      if (!st.breaker.ProbeSlotFree(p.breaker, now)) {
        DeferOrGiveUp(&d, p, Reason::kHalfOpenBusy,
                      DeferTo(st, p, now, now + HalfOpenWait(p), rng),
                      in.deadline, in.first_attempt_time);
        return d;
      }
      st.breaker.AcquireProbe();
    }
    // First attempts fund the budget; a retry spends from it only when it
    // fails (Report), so a retry that succeeds costs nothing.
    if (!retry) st.budget.RecordFirstAttempt(p.budget, now);
    if (probe) {
      Proceed(&d, Reason::kHalfOpenProbe, absl::ZeroDuration());
    } else if (!retry) {
      Proceed(&d, Reason::kInitialJitter,
              UniformDuration(rng, p.backoff.initial_jitter));
    } else {
      Proceed(&d, Reason::kAdmitted, absl::ZeroDuration());
    }
    return d;
  }

  static void DeferBudget(St& st, const PolicyParams& p, absl::Time now,
                          absl::BitGenRef rng, absl::Time deadline,
                          absl::Time first_attempt, Decision* d) {
    // The budget frees up as the window slides: come back no sooner than
    // one slot from now, at the endpoint's release pace. Coming back is only
    // an Admit, and the budget admits then what it allows; booking the
    // returns at the budget's own rate (10/s by default) would schedule a
    // parked herd of thousands past any deadline.
    const absl::Duration slot = p.budget.window / RetryBudget::kSlots;
    DeferOrGiveUp(d, p, Reason::kBudgetExhausted,
                  DeferTo(st, p, now, now + slot, rng), deadline,
                  first_attempt);
  }

  static Decision Report(Engine& e, St& st, const PolicyParams& p,
                         const ReportInput& in, absl::Time now,
                         absl::BitGenRef rng, bool untracked) {
    Decision d;
    d.untracked = untracked;
    d.attempt = in.attempt;
    Transition(e, untracked, &d, st.breaker.Refresh(p.breaker, now));

    switch (in.outcome) {
      case Outcome::kSuccess:
        Transition(e, untracked, &d, st.breaker.OnAnswer(p.breaker, now));
        st.previous_delay_ns = 0;  // reset on success only, never by time
        d.verdict = Verdict::kDone;
        d.reason = Reason::kSucceeded;
        return d;
      case Outcome::kNotRetryable:
        // The endpoint answered: it is up, whatever it thought of us.
        Transition(e, untracked, &d, st.breaker.OnAnswer(p.breaker, now));
        GiveUp(&d, Reason::kNotRetryable);
        return d;
      case Outcome::kRetryableFailure:
      case Outcome::kTimeout:
      case Outcome::kRateLimited:
        break;
    }

    // A failure. Remember the endpoint's Retry-After for the whole fleet
    // first: it is information even if this delivery goes no further.
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
    // The endpoint is up (CLOSED) but failed an attempt while the release
    // queue was feeding it: the queue's pace is more than it can take.
    const bool releasing = Releasing(st, now);
    const bool overload =
        releasing && st.breaker.state() == BreakerState::kClosed;
    if (overload) CutReleaseRate(st, p, now);
    // A failed retry is what the budget bounds: it spends now. Not while
    // the queue releases, unless this was a probe (HALF_OPEN): a CLOSED
    // failure is re-paced onto the release queue below, and an OPEN one (a
    // straggler answered after the trip) is deferred by the breaker, so the
    // queue's adapted pace bounds the load either way, and spending would
    // stop the whole queue (successes included) for a budget window.
    const bool spends =
        !releasing || st.breaker.state() == BreakerState::kHalfOpen;
    if (in.attempt > 1 && spends) st.budget.RecordRetry(p.budget, now);
    // A 429 with Retry-After is the endpoint pacing us, not failing: it
    // does not feed the breaker. Without Retry-After it counts.
    const bool paced =
        in.outcome == Outcome::kRateLimited && in.retry_after.has_value();
    if (!paced) {
      Transition(e, untracked, &d, st.breaker.OnFailure(p.breaker, now, rng));
    }

    d.attempt = in.attempt + 1;
    if (in.attempt >= p.backoff.max_attempts) {
      GiveUp(&d, Reason::kAttemptsExhausted);
      return d;
    }
    if (st.breaker.state() == BreakerState::kOpen) {
      DeferOrGiveUp(&d, p, Reason::kCircuitOpen,
                    DeferTo(st, p, now, st.breaker.open_until(), rng),
                    in.deadline, in.first_attempt_time);
      return d;
    }
    if (st.breaker.state() == BreakerState::kHalfOpen &&
        !st.breaker.ProbeSlotFree(p.breaker, now)) {
      DeferOrGiveUp(&d, p, Reason::kHalfOpenBusy,
                    DeferTo(st, p, now, now + HalfOpenWait(p), rng),
                    in.deadline, in.first_attempt_time);
      return d;
    }
    if (!st.budget.CanRetry(p.budget, now)) {
      // Answer at once: no delay is computed for a retry that will not be
      // allowed, and the decorrelated state does not move.
      DeferBudget(st, p, now, rng, in.deadline, in.first_attempt_time, &d);
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
    if (overload) {
      // Re-paced: the retry goes to the back of the release queue, at the
      // adapted pace, rather than back in after a short backoff on top of
      // the queue's own load.
      delay = DeferTo(st, p, now, now + delay, rng) - now;
    }
    if (PastDeadline(p, now + delay, in.deadline, in.first_attempt_time)) {
      // No retry, so no realised delay: the decorrelated state stays.
      GiveUp(&d, Reason::kDeadline);
      return d;
    }
    if (p.backoff.kind == BackoffKind::kDecorrelatedJitter) {
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
    snap.release_rate = ReleaseRate(st, p, now);
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
    return EngineDecider::Admit(*this, st, p, in, now, rng, untracked);
  });
}

absl::StatusOr<Decision> Engine::Report(const ReportInput& in) {
  if (absl::Status s = ValidateReport(in); !s.ok()) return s;
  return WithEndpoint(in.endpoint, [&](EndpointState& st,
                                       const PolicyParams& p, absl::Time now,
                                       absl::BitGenRef rng, bool untracked) {
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
  return EngineDecider::Snapshot(*shard.config, endpoint, **it, now);
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
