// HeldBook: the held calls one lease stream carries for its client
// (proto/stagger/v1/sync.proto, "Held calls"): which are out, what goes up
// next, and how each ends. Plain code on the caller's clock: SyncSession
// drives it with threads and gRPC, the protocol simulator
// (bench/protocol_sim) with simulated time.
//
//   * Hold(request, wait, now, answer_by, done): a new call and its id. It
//     gives up at min(now + wait + kHeldGrace, answer_by).
//   * Each call ends exactly once, through its `done`, which the book hands
//     back (TakeFinished) for the caller to run outside its lock:
//       - the replica's answer (Answer), or its error;
//       - DEADLINE_EXCEEDED at its give-up time (GiveUp(now));
//       - CANCELLED after Drop(id) (its worker went away);
//       - EndAll(status), in the order the calls came: the stream broke (UNAVAILABLE: the caller sends
//         the call another way);
//       - EndAllLeft(): the replica left the members. UNAVAILABLE too: the
//         caller re-routes the call to its key's new owner.
//   * FillUp(up): what goes up next: new holds, then drops of calls the
//     replica has (given up or dropped after they went), then returns.
//   * An answer for a call that ended after it went up, and that let a
//     delivery go, goes back up (a return): its probe goes to the next
//     waiter.
//   * NextStep(result): what the caller does with a call's end. Both
//     CoordinatorClient and the protocol simulator follow it.
// Not thread-safe: the caller holds its own lock.
//
//   HeldBook book;
//   uint64_t id = book.Hold(req, wait, now, answer_by, done);
//   book.FillUp(&up);           // the hold goes up
//   book.Answer(answer);        // from the replica
//   for (auto& f : book.TakeFinished()) f.done(std::move(f.result));
#ifndef STAGGER_CLIENT_INTERNAL_HELD_BOOK_H_
#define STAGGER_CLIENT_INTERNAL_HELD_BOOK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::client {

// What a held call's end asks of its caller.
enum class HeldNext {
  kFollow,    // the replica's answer: follow it
  kFallback,  // no answer by the give-up time: the local fallback decides
  kResend,    // the stream ended, or its replica left: the key's owner now
  kFail,      // anything else (CANCELLED: the worker went away): give it back
};
HeldNext NextStep(const absl::StatusOr<v1::AdmitResponse>& result);

class HeldBook {
 public:
  // How long after its wait a held call's answer may come: the replica
  // answers at the wait's end, plus the time to reach this client. A busy
  // replica or agent (a container throttled for its 100 ms CPU period) may
  // be that late. The fallback that answers instead knows nothing of the
  // endpoint's Retry-After window, so its answer is the worse one. (50 ms
  // let a fallback admit a retry inside a window, once, under ASan.)
  static constexpr absl::Duration kHeldGrace = absl::Milliseconds(250);
  // Holds, drops and returns per message (sync.proto allows 10,000).
  static constexpr int kPerMessage = 1000;

  using Done = std::function<void(absl::StatusOr<v1::AdmitResponse>)>;
  struct Finished {
    Done done;
    absl::StatusOr<v1::AdmitResponse> result;
  };

  // `wait` > 0 (request.wait, parsed). `now` and `answer_by` are on the
  // same clock as every later GiveUp(now).
  uint64_t Hold(v1::AdmitRequest request, absl::Duration wait, absl::Time now,
                absl::Time answer_by, Done done);
  void Drop(uint64_t id);
  // Ends the calls whose give-up time is <= now (DEADLINE_EXCEEDED).
  void GiveUp(absl::Time now);
  void Answer(const v1::HeldAnswer& a);
  void EndAll(const absl::Status& status);
  void EndAllLeft();
  bool FillUp(v1::SyncUp* up);

  // The earliest give-up time (InfiniteFuture: none).
  absl::Time NextGiveUp() const;
  // Something waits to go up.
  bool HasOutgoing() const {
    return !holds_out_.empty() || !drops_out_.empty() || !returns_out_.empty();
  }
  // The `done`s due, in the order their calls ended.
  std::vector<Finished> TakeFinished();
  bool HasFinished() const { return !finished_.empty(); }
  size_t size() const { return held_.size(); }

 private:
  struct Held {
    v1::AdmitRequest request;
    Done done;
    absl::Time give_up;
    bool sent = false;  // in a message already
  };
  // Takes `id` out; a call the replica has is dropped there too.
  Held Take(uint64_t id);

  uint64_t next_id_ = 1;
  std::map<uint64_t, Held> held_;  // by id: EndAll ends them in that order
  std::set<std::pair<absl::Time, uint64_t>> give_ups_;
  std::deque<uint64_t> holds_out_;  // not sent yet
  std::vector<uint64_t> drops_out_;
  std::vector<v1::ReturnedRelease> returns_out_;
  // Ended after they were sent: an answer may still come for them.
  absl::flat_hash_map<uint64_t, std::string> dropped_;
  std::vector<Finished> finished_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_HELD_BOOK_H_
