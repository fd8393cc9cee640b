// Shared by the fuzz targets (tests/fuzz/*_fuzz.cc):
//   FUZZ_CHECK(cond) << "..."   an invariant; a violation prints the message
//                               and aborts, which libFuzzer reports as a
//                               crash (and the corpus replay test as a
//                               failure), with the input saved.
//   ByteReader                  takes typed values off the front of the
//                               fuzzer's input; past the end it yields zeros,
//                               so every input is a complete program.
//   DecisionBounds              what every engine decision must satisfy,
//                               from the configurations in force:
//                                 verdict/reason pairs as docs/API.md's
//                                   verdict table;
//                                 PROCEED: 0 <= delay <= the largest of the
//                                   policies' cap, initial_jitter and
//                                   retry_after_max + deferral.spread (over
//                                   every config applied so far: a
//                                   Retry-After window outlives a reload),
//                                   and a LAST_CHANCE starts before the
//                                   deadline;
//                                 DEFER: now <= defer_until, and not past
//                                   the delivery's deadline;
//                                 attempt: the request's (Admit), the next
//                                   one (failure Report).
// Header-only; the fuzz targets link it into the libFuzzer build and into
// the corpus replay tests of the normal suite (replay_main.cc).
#ifndef STAGGER_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define STAGGER_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"

namespace stagger::fuzz {

// Collects the message of a failed FUZZ_CHECK and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    out_ << file << ":" << line << ": invariant broken: " << cond << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "%s\n", out_.str().c_str());
    std::fflush(stderr);
    std::abort();
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  std::ostringstream out_;
};

// A loop, not an if/else, so that it nests in an unbraced if; the body runs
// at most once (CheckFailure's destructor aborts).
#define FUZZ_CHECK(cond) \
  while (!(cond)) ::stagger::fuzz::CheckFailure(__FILE__, __LINE__, #cond)

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), left_(size) {}

  bool empty() const { return left_ == 0; }
  size_t left() const { return left_; }

  template <typename T>
  T Take() {
    T v{};
    const size_t n = left_ < sizeof(T) ? left_ : sizeof(T);
    std::memcpy(&v, data_, n);
    data_ += n;
    left_ -= n;
    return v;
  }
  // A value in [lo, hi] (inclusive).
  int64_t InRange(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const uint64_t raw = Take<uint64_t>();
    return span == 0 ? lo + static_cast<int64_t>(raw)
                     : lo + static_cast<int64_t>(raw % span);
  }
  bool Bool() { return (Take<uint8_t>() & 1) != 0; }
  // Up to `max` bytes, the length taken first.
  std::string Bytes(size_t max) {
    const size_t n = static_cast<size_t>(InRange(0, static_cast<int64_t>(max)));
    return Rest(n);
  }
  // The next `n` bytes (fewer at the end).
  std::string Rest(size_t n) {
    if (n > left_) n = left_;
    std::string s(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    left_ -= n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t left_;
};

// docs/API.md's verdict table.
inline bool ValidPair(engine::Verdict v, engine::Reason r) {
  using R = engine::Reason;
  switch (v) {
    case engine::Verdict::kProceed:
      return r == R::kInitialJitter || r == R::kBackoff ||
             r == R::kRetryAfter || r == R::kHalfOpenProbe ||
             r == R::kAdmitted || r == R::kLastChance || r == R::kReleased;
    case engine::Verdict::kDefer:
      return r == R::kCircuitOpen || r == R::kHalfOpenBusy ||
             r == R::kRetryAfterWindow || r == R::kBudgetExhausted ||
             r == R::kPaced || r == R::kPaused;
    case engine::Verdict::kGiveUp:
      return r == R::kNotRetryable || r == R::kAttemptsExhausted ||
             r == R::kDeadline || r == R::kEndpointDisabled;
    case engine::Verdict::kDone:
      return r == R::kSucceeded;
  }
  return false;
}

class DecisionBounds {
 public:
  // Call for every configuration the engine has been given.
  void Add(const engine::EngineConfig& c) {
    AddPolicy(c.default_policy);
    for (const engine::PolicyOverride& o : c.overrides) AddPolicy(o.policy);
  }
  absl::Duration max_delay() const { return max_delay_; }

  // `now`: the clock when the decision was made; `deadline`: the request's
  // (InfiniteFuture if none); `expected_attempt`: see the file comment.
  void Check(const engine::Decision& d, absl::Time now, absl::Time deadline,
             int expected_attempt) const {
    FUZZ_CHECK(ValidPair(d.verdict, d.reason))
        << "verdict " << engine::VerdictName(d.verdict) << " with reason "
        << static_cast<int>(d.reason);
    FUZZ_CHECK(d.attempt == expected_attempt)
        << "attempt " << d.attempt << ", expected " << expected_attempt;
    if (d.verdict == engine::Verdict::kProceed) {
      FUZZ_CHECK(d.delay >= absl::ZeroDuration()) << d.delay;
      FUZZ_CHECK(d.delay <= max_delay_)
          << engine::ReasonName(d.reason) << " delay " << d.delay
          << " over the policies' bound " << max_delay_;
      if (d.reason == engine::Reason::kLastChance) {
        FUZZ_CHECK(now + d.delay <= deadline)
            << "LAST_CHANCE starts " << d.delay << " from now, after the "
            << "deadline " << (deadline - now) << " from now";
      }
    }
    if (d.verdict == engine::Verdict::kDefer) {
      FUZZ_CHECK(d.defer_until >= now)
          << engine::ReasonName(d.reason) << " defer_until "
          << (d.defer_until - now) << " from now";
      FUZZ_CHECK(d.defer_until <= deadline)
          << engine::ReasonName(d.reason) << " defer_until "
          << (d.defer_until - now) << " from now, past the deadline "
          << (deadline - now) << " from now";
    }
  }

 private:
  void AddPolicy(const engine::PolicyParams& p) {
    const absl::Duration m =
        std::max({p.backoff.cap, p.backoff.initial_jitter,
                  p.backoff.retry_after_max + p.deferral.spread});
    if (m > max_delay_) max_delay_ = m;
  }
  absl::Duration max_delay_ = absl::ZeroDuration();
};

}  // namespace stagger::fuzz

#endif  // STAGGER_TESTS_FUZZ_FUZZ_SUPPORT_H_
