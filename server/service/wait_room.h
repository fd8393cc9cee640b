// WaitRoom: staggerd's waiting Admits (AdmitRequest.wait) held as pending
// callback calls, with no thread per call; the engine decides each step
// (Engine::AdmitWaiting; core/engine/decision.h, "Waiting admission").
//
//   * Hold(call): the engine said hold when the call arrived: it waits in
//     its endpoint's line, most urgent deadline first (then arrival). At
//     most max_waiting workers' calls and max_agent_held agents' calls
//     wait at once, and one agent's calls at most AgentShare() of those
//     (a tenth: no agent takes every slot): beyond that Hold returns false
//     and the caller answers as an Admit would now (counted).
//   * A timer looks at an endpoint's line when the engine's
//     recheck time comes, when Wake(endpoint) says something happened (a
//     report, counts from an agent, an operator's action), and at each
//     call's expiry: its wait, or its gRPC deadline less kDeadlineMargin.
//     A look answers the calls whose time is up (as an Admit then), and
//     releases calls from the head of the line until the engine holds one.
//   * A look's work is bounded by what it releases (waiting_line.h): calls
//     held only by their own backoff wait apart, by arrival, and join the
//     line only on evidence of recovery after they arrived
//     (Engine::LastEvidence, asked once per look). So a look costs at most
//     one engine call per call it releases or moves, plus two; never one
//     per call in the line (engine_calls() counts them).
//   * A call the worker cancels leaves the line and is answered CANCELLED;
//     a probe released to a call cancelled meanwhile is given back
//     (Engine::ReturnProbe) and the line looked at again, so the probe goes
//     to the next call instead of sitting out its timeout.
//   * Shutdown(): every waiting call is answered now (as an Admit would
//     be), and later calls are not held.
//   * Who drives the timer (Options::driver): the room's own thread
//     (staggerd), or its caller (the protocol simulator, tests). A caller
//     calls RunDue() when clock->Now() reaches NextDue(), and asks
//     NextDue() again after anything it did to the room:
//       room.Hold(call, recheck);
//       while (clock.Now() >= room.NextDue()) room.RunDue();
//     The decisions are the same code either way.
// `answered(decision)` runs for every answer (metrics). Thread-safe. Lock
// order: the room's lock, then the engine's shard locks; never the reverse.
#ifndef STAGGER_SERVER_SERVICE_WAIT_ROOM_H_
#define STAGGER_SERVER_SERVICE_WAIT_ROOM_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "server/metrics/server_metrics.h"
#include "server/service/waiting_line.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::service {

class WaitRoom;

// One call in a waiting line: its request (the input borrows its
// endpoint) and its wait. Two kinds: a worker's gRPC call held here
// (WaitingCall) and a call an agent holds for us
// (server/service/agent_held_calls.h). The room ends a call it held exactly
// once, by Answer or Cancelled, and never touches it after.
class HeldCall {
 public:
  virtual ~HeldCall() = default;
  const engine::AdmitInput& in() const { return in_; }
  engine::WaitState& wait() { return w_; }
  absl::Time expiry() const { return w_.until; }
  // The caller went away: a probe released to it goes back to the engine.
  virtual bool cancelled() const = 0;
  // An agent's call (its own bound: Options::max_agent_held).
  virtual bool for_agent() const { return false; }
  // The agent's bound id (agent_identity.h) of an agent's call: its share
  // of Options::max_agent_held is kept per agent. Empty: a worker's call.
  virtual absl::string_view agent() const { return {}; }
  // Gives `d` (now: the server's clock) to the caller; ends the call.
  virtual void Answer(const engine::Decision& d, absl::Time now) = 0;
  // Ends the call without an answer (it was cancelled).
  virtual void Cancelled() = 0;

 protected:
  HeldCall(v1::AdmitRequest request, engine::AdmitInput in,
           engine::WaitState w);

 private:
  const v1::AdmitRequest request_;
  engine::AdmitInput in_;
  engine::WaitState w_;
};

// A worker's call held as a pending callback call. Owned by gRPC (deleted
// in OnDone).
class WaitingCall final : public grpc::ServerUnaryReactor, public HeldCall {
 public:
  WaitingCall(WaitRoom* room, grpc::CallbackServerContext* ctx,
              grpc::ByteBuffer* resp, v1::AdmitRequest request,
              engine::AdmitInput in, engine::WaitState w);
  bool cancelled() const override { return ctx_->IsCancelled(); }
  void Answer(const engine::Decision& d, absl::Time now) override;
  void Cancelled() override;

  void OnCancel() override;
  void OnDone() override { delete this; }
  // Both reactions are short (OnCancel: take the call off its line and
  // finish it; OnDone: delete), so gRPC may run them inline on the thread
  // that completes the call instead of handing them to its executor. That
  // also keeps the delete ordered after gRPC's last use of this reactor by
  // the call's own reference count, which ThreadSanitizer sees; the
  // executor hand-over happens inside uninstrumented libgrpc++, where it
  // cannot (docs/SANITIZERS.md).
  bool InternalInlineable() override { return true; }

 private:
  WaitRoom* const room_;
  grpc::CallbackServerContext* const ctx_;
  grpc::ByteBuffer* const resp_;
};

class WaitRoom {
 public:
  static constexpr absl::Duration kDeadlineMargin = absl::Milliseconds(100);
  // One agent holds at most max_agent_held / kAgentShareDivisor calls (at
  // least 1).
  static constexpr size_t kAgentShareDivisor = 10;
  enum class Driver : uint8_t {
    kOwnThread,  // a timer thread, sleeping on `clock` (staggerd)
    kCaller,     // the caller calls RunDue() at NextDue()
  };
  struct Options {
    size_t max_waiting = 100000;     // --max_waiting_calls
    size_t max_agent_held = 100000;  // --max_agent_held_calls
    Driver driver = Driver::kOwnThread;
  };
  using Answered = std::function<void(const engine::Decision&)>;
  // `engine`, `clock` and `metrics` (null: none; the gauge of calls held
  // and the overflow count) must outlive the room.
  WaitRoom(engine::Engine* engine, const engine::Clock* clock, Options options,
           Answered answered, metrics::ServerMetrics* metrics = nullptr);
  ~WaitRoom();  // Shutdown()

  // `recheck`: the engine's, when the call arrived.
  bool Hold(HeldCall* call, absl::Time recheck);
  void Wake(absl::string_view endpoint);
  // Wake() for every endpoint with a line whose key `match` accepts.
  void WakeIf(const std::function<bool(absl::string_view)>& match);
  // Takes `call` off its line. True: it was there, and the caller ends it
  // (Cancelled); false: its answer is on its way (that answer stands).
  bool Cancel(HeldCall* call);
  void Shutdown();

  // Driver::kCaller: when a look is next due on the room's clock
  // (InfiniteFuture: none), and every look due at clock->Now(), answers
  // delivered. With Driver::kOwnThread the thread does this; RunDue()
  // must not be called then.
  absl::Time NextDue();
  void RunDue();

  int64_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
  // Whether Hold would take one more call of that kind (of `agent`, for an
  // agent's) now; if not, the call is counted as an overflow (the caller
  // answers it as an Admit now).
  bool HasRoom(bool for_agent = false, absl::string_view agent = {});
  size_t AgentShare() const {
    return std::max<size_t>(1, options_.max_agent_held / kAgentShareDivisor);
  }
  // Calls `agent` holds now.
  int64_t held_for(absl::string_view agent);
  int64_t held_for_agents() const {
    return agent_held_.load(std::memory_order_relaxed);
  }
  int64_t overflows() const {
    return overflows_.load(std::memory_order_relaxed);
  }
  // The engine calls looks made (AdmitWaiting and LastEvidence), and the
  // looks, since start: the work releases cost (tests, benchmarks).
  int64_t engine_calls() const {
    return engine_calls_.load(std::memory_order_relaxed);
  }
  int64_t looks() const { return looks_.load(std::memory_order_acquire); }

 private:
  struct Line {
    WaitingLine<HeldCall*> calls;
    absl::Time next_look = absl::InfiniteFuture();
  };
  using Timer = std::pair<absl::Time, std::string>;
  // Looks due at the same time go in key order (a driven room runs the
  // same way every time).
  struct Later {
    bool operator()(const Timer& a, const Timer& b) const {
      return a.first != b.first ? a.first > b.first : a.second > b.second;
    }
  };
  // What a look decided: calls to answer (outside the lock).
  struct Answer {
    HeldCall* call;
    engine::Decision decision;
  };

  void Run();  // the timer thread
  // Pops the timers due at `now`; the key of the first that is still
  // its line's next look (nullopt: none).
  std::optional<std::string> TakeDue(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops the timers at the top that no line waits for any more.
  void DropStale() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Look(const std::string& key);
  // The line's calls whose time is up, then its releases.
  void Expire(Line& line, absl::Time now, std::vector<Answer>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Release(const std::string& key, Line& line,
                     std::vector<Answer>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<engine::WaitOutcome> Step(HeldCall* call,
                                           engine::WaitStep step);
  void Remove(Line& line, HeldCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Schedule(const std::string& key, Line& line, absl::Time at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<Answer> answers);
  void CountOverflow();
  // Whether `call` fits the room's bounds now (its kind's, its agent's).
  bool Fits(const HeldCall& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine* const engine_;
  const engine::Clock* const clock_;
  const Options options_;
  const Answered answered_;
  metrics::ServerMetrics* const metrics_;
  std::atomic<int64_t> waiting_{0};      // every kind
  std::atomic<int64_t> agent_held_{0};   // for_agent() ones
  std::atomic<int64_t> overflows_{0};
  std::atomic<int64_t> engine_calls_{0};
  std::atomic<int64_t> looks_{0};
  // Wake was called: the timer thread measures its sleep again (a test's
  // fake clock may have moved past a look it was sleeping towards).
  bool poked_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Line> lines_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<HeldCall*, std::string> where_
      ABSL_GUARDED_BY(mu_);  // call -> its line's key
  // Agents' calls held now, by agent.
  absl::flat_hash_map<std::string, int64_t> by_agent_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Timer, std::vector<Timer>, Later> timers_
      ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WAIT_ROOM_H_
