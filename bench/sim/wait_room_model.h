// WaitRoomModel: staggerd's wait room (server/service/wait_room.h) on the
// simulator's clock, deciding every step with the engine's AdmitWaiting
// exactly as the server does (core/engine/decision.h, "Waiting
// admission"):
//   * Hold(call, recheck): the engine held the call at kArrive; it waits in
//     its endpoint's line, most urgent deadline first (then arrival), and
//     the line is looked at by min(recheck, the call's expiry).
//   * Wake(endpoint): something happened on the endpoint (a Report, counts
//     with successes from an agent): its line is looked at now (as the
//     server's timer thread would, right after the event).
//   * Look(endpoint): the calls whose wait ran out get kExpire (the answer
//     an Admit gets then); then calls are released from the head of the
//     line (kRecheck) until the engine holds one that its gates hold (a
//     call held only by its own backoff is passed over); the line is looked
//     at again by the earliest recheck seen or expiry.
// One shortcut, which changes no answer: a call held by its own backoff
// (WaitState::backoff) goes only on evidence of recovery newer than its
// arrival (engine::LastEvidence: the gate opening again on its probes'
// successes, or a Retry-After window's end), so it is passed over without
// asking the engine while the endpoint can have none: no success was
// reported for it since the call arrived (NoteSuccess, at least as late as
// the engine's) and it never sent a Retry-After (NoteRetryAfter). The engine would answer "hold until your
// wait ends" (a look per report over a line's backoff calls is most of a
// run's cost otherwise). The lines' indexes drop answered calls lazily (a
// call's entry is skipped and erased when met), which changes no order.
// Answers of one look are handed out after it, in order (expiries, then
// releases). Calls are never cancelled here (the client gives each call a
// deadline past its wait), and the room has no size limit (staggerd's
// --max_waiting_calls is 100,000; the largest grid fleet is 100,000).
// Internal to bench/sim; single-threaded.
#ifndef STAGGER_BENCH_SIM_WAIT_ROOM_MODEL_H_
#define STAGGER_BENCH_SIM_WAIT_ROOM_MODEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/sim/quad_heap.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"

namespace stagger::sim {

class WaitRoomModel {
 public:
  // Look at `endpoint`'s line at virtual time `t_ns` (an engine instant
  // rounded up to a whole ns).
  using ScheduleLook = std::function<void(int64_t t_ns, int endpoint)>;
  // A held call's answer; `expired`: at the end of its wait (else released
  // before it).
  using Answer = std::function<absl::Status(
      int call, const engine::Decision& d, bool expired)>;

  // Calls are numbered 0..calls-1 (one per delivery: a delivery has at most
  // one call held); `engine` and `clock` must outlive the room.
  WaitRoomModel(engine::Engine* engine, const engine::Clock* clock,
                int endpoints, int calls, ScheduleLook schedule,
                Answer answer);

  // `in.endpoint` must stay valid while the call is held. An error if the
  // run held more than 2^32 - 1 calls in all (a bound no grid run nears).
  absl::Status Hold(int call, int endpoint, const engine::AdmitInput& in,
                    const engine::WaitState& w, absl::Time recheck);
  void Wake(int endpoint);
  // The engine learned of a success on `endpoint` now (a Report, or an
  // agent's counts), or of a Retry-After from it.
  void NoteSuccess(int endpoint);
  void NoteRetryAfter(int endpoint);
  // The look scheduled for `t_ns`; nothing if a sooner one replaced it.
  absl::Status Look(int endpoint, int64_t t_ns);

  int64_t waiting() const { return waiting_; }

 private:
  static constexpr int64_t kNever = INT64_MAX;  // no look scheduled
  // Compact (16 bytes): the lines hold up to every delivery.
  struct Entry {
    int64_t order_ns;  // deadline (urgency) or expiry, rounded up to a ns
    uint32_t seq;      // arrival, from 1
    int32_t call;
    bool operator<(const Entry& o) const {
      return order_ns != o.order_ns ? order_ns < o.order_ns : seq < o.seq;
    }
  };
  struct Line {
    absl::btree_set<Entry> by_urgency;
    QuadHeap<Entry, std::less<Entry>> by_expiry;
    int64_t held = 0;
    int64_t next_look_ns = kNever;
    // The latest success the engine learned, virtual ns (-1: none), and
    // whether the endpoint ever sent a Retry-After.
    int64_t success_ns = -1;
    bool retry_after = false;
  };
  struct Call {
    engine::AdmitInput in;
    engine::WaitState w;
    int endpoint = 0;
  };
  struct Answered {
    int call;
    engine::Decision decision;
    bool expired;
  };

  void Schedule(int endpoint, absl::Time at);
  // Whether `e` names a call still held (else it is a leftover).
  bool Current(const Entry& e) const { return held_seq_[e.call] == e.seq; }
  void Remove(Line& line, int call);
  // The line's earliest expiry, virtual ns (leftovers dropped); kNever if
  // none.
  int64_t NextExpiry(Line& line);
  absl::Status Expire(Line& line, absl::Time now, std::vector<Answered>* out);
  absl::Status Release(Line& line, std::vector<Answered>* out,
                       absl::Time* next);
  // The shortcut above: `c` is held by its backoff and the engine has no
  // evidence newer than its arrival.
  static bool StillBackingOff(const Line& line, const Call& c);

  engine::Engine* const engine_;
  const engine::Clock* const clock_;
  const ScheduleLook schedule_;
  const Answer answer_;
  std::vector<Line> lines_;
  std::vector<Call> calls_;
  std::vector<uint32_t> held_seq_;  // per call: its entries' seq; 0: not held
  uint32_t seq_ = 0;
  int64_t waiting_ = 0;
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_WAIT_ROOM_MODEL_H_
