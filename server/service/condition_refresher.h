// ConditionRefresher: finds the changes that time alone makes, so that the
// condition feed (and so the watch) reports them without traffic: an OPEN
// breaker's time ends (HALF_OPEN), a Retry-After window ends, a release or
// a run of failures fades, a breaker away from CLOSED reaches the policy's
// disable.after_unavailable. The engine finds a change only when asked
// (Engine::RefreshCondition); this asks, for the endpoints that are not
// clear and only then. It also tells when an operator's pause runs out
// (a PauseTable does not: the pause just ends).
//
// It is a ConditionSink (fed every change, under the endpoint's shard
// lock: it only records when to look again) and a pause listener. Each
// round (Start(): every kPeriod; RunOnce() in tests) refreshes the
// endpoints whose time has come, most overdue first, at most
// kMaxPerRound, and reports every pause that reached its end:
//   OPEN               at open_until
//   Retry-After        at its end
//   releasing, near a trip          every kPoll
//   HALF_OPEN (not disabled)        every kSlowPoll (nothing but the
//                                   after_unavailable trigger changes it)
//   disabled alone, or clear        never
// So a time-driven change is reported within kPeriod of its time while
// fewer than kMaxPerRound endpoints are due at once; beyond that, at
// kMaxPerRound / kPeriod (10,000) refreshes per second, each one shard
// lock and one hash lookup. Memory: one entry per not-clear endpoint and
// per pause.
//
// Thread-safe. `engine` and `clock` must outlive it; Stop() before they go.
#ifndef STAGGER_SERVER_SERVICE_CONDITION_REFRESHER_H_
#define STAGGER_SERVER_SERVICE_CONDITION_REFRESHER_H_

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine.h"
#include "core/engine/pause_table.h"

namespace stagger::service {

class ConditionRefresher : public engine::ConditionSink {
 public:
  static constexpr absl::Duration kPeriod = absl::Milliseconds(250);
  static constexpr int kMaxPerRound = 2500;
  static constexpr absl::Duration kPoll = absl::Seconds(1);
  static constexpr absl::Duration kSlowPoll = absl::Seconds(10);

  // `ran_out` is told of each pause that reached its end, on the round's
  // thread, with no lock held.
  using PauseRanOut = std::function<void(const engine::Pause&)>;
  ConditionRefresher(engine::Engine* engine, const engine::Clock* clock,
                     PauseRanOut ran_out);
  ~ConditionRefresher();

  void OnConditionChange(const engine::ConditionChange& c) override;
  void OnPause(const engine::Pause& p, bool removed);

  // One round now; returns how many endpoints it refreshed.
  int RunOnce();
  void Start();
  void Stop();

  // Endpoints and pauses it watches the time of.
  size_t endpoints() const;
  size_t pauses() const;

 private:
  struct Entry {
    absl::Time due;
    engine::EndpointCondition condition;
  };
  // When `to` may change by time alone (InfiniteFuture: never).
  static absl::Time DueOf(const engine::ConditionChange& c, absl::Time now);
  void Schedule(const std::string& key, absl::Time due,
                engine::EndpointCondition condition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unschedule(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine* const engine_;
  const engine::Clock* const clock_;
  const PauseRanOut ran_out_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, std::string>> due_ ABSL_GUARDED_BY(mu_);
  // (prefix, target) -> the pause in force.
  absl::flat_hash_map<std::pair<bool, std::string>, engine::Pause> pauses_
      ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_CONDITION_REFRESHER_H_
