#include "server/service/sync_service.h"

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/lease/messages.h"
#include "core/rpc/raw_unary.h"
#include "core/wire/sync_wire.h"
#include "google/protobuf/arena.h"
#include "server/security/authz_processor.h"
#include "server/service/agent_identity.h"

namespace stagger::service {
namespace {

grpc::ByteBuffer Serialize(const v1::SyncDown& down) {
  std::string bytes;
  down.SerializeToString(&bytes);
  grpc::Slice slice(std::move(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

bool Empty(const v1::SyncDown& d) { return d.ByteSizeLong() == 0; }

// One agent's stream. Deleted in OnDone, after it left the hub and closed
// its held calls: nothing calls it after that.
class SyncStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public SyncPeer {
 public:
  SyncStream(grpc::CallbackServerContext* ctx, SyncHub* hub,
             const SyncService::Counter* count, size_t max_backlog_bytes,
             const SyncService::HeldCallsFactory& held_calls)
      : ctx_(ctx),
        hub_(hub),
        count_(count),
        max_backlog_bytes_(max_backlog_bytes),
        held_calls_(held_calls) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return EndWith(grpc::Status::OK);  // the agent closed
    Count(SyncService::Direction::kIn);
    // One arena per message: a count report's thousands of small
    // messages cost no allocation each, and go in one release.
    google::protobuf::Arena arena(rpc::CallArenaOptions());
    v1::SyncUp& up =
        *google::protobuf::Arena::CreateMessage<v1::SyncUp>(&arena);
    if (!rpc::ParseRequest(in_, &up)) {
      return EndWith(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("SyncUp: ", in_.Length(),
                       " bytes that are not a valid stagger.v1.SyncUp")));
    }
    if (absl::Status s = Receive(up); !s.ok()) {
      return EndWith(rpc::ToGrpcStatus(s));
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      if (!ok) {  // the stream is going away: nothing more is written
        write_failed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
        own_queued_ = 0;
      }
    }
    Pump();
  }

  // gRPC may run OnDone on its executor inside uninstrumented libgrpc++
  // (docs/SANITIZERS.md); taking mu_ first orders it after every locked
  // use of the queue for ThreadSanitizer. Answers never handed to gRPC
  // give their probes back now (an answer written but never read keeps
  // its probe until the breaker's probe_timeout).
  void OnDone() override {
    std::shared_ptr<AgentHeldCalls> held;
    std::vector<PendingAnswer> unsent;
    {
      absl::MutexLock l(&mu_);
      held = held_;
      unsent.swap(answers_);
    }
    if (held != nullptr) held->Close();  // sends nothing more to us
    GiveBack(held.get(), unsent);
    hub_->Close(stream(), this);
    delete this;
  }
  ~SyncStream() override { absl::MutexLock l(&mu_); }

  // From the hub, under its lock.
  void Push(const grpc::ByteBuffer& shared) override {
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      if (queued_bytes_ + shared.Length() > max_backlog_bytes_) {
        if (!FellBehind()) return;
      } else {
        queue_.push_back({shared, /*shared=*/true});
        queued_bytes_ += shared.Length();
      }
    }
    Pump();
  }
  void End() override { EndWith(grpc::Status::OK); }
  void Opened(uint64_t stream, const v1::SyncDown& first) override {
    {
      absl::MutexLock l(&mu_);
      stream_ = stream;
    }
    EnqueueOwn(first);
  }

 private:
  uint64_t stream() {
    absl::MutexLock l(&mu_);
    return stream_;
  }

  // An answer to a held call not yet handed to gRPC, and its endpoint (to
  // give a probe back if it never goes).
  struct PendingAnswer {
    v1::HeldAnswer answer;
    std::string endpoint;
  };

  struct Item {
    grpc::ByteBuffer bytes;
    bool shared;          // a push: may be dropped for a snapshot
    bool resync = false;  // the snapshot that replaced dropped pushes
  };

  void Count(SyncService::Direction d) {
    if (*count_) (*count_)(d);
  }

  // The stream fell behind: its pushes make way for one snapshot, unless
  // one is already waiting (then it ends). False: it ended.
  bool FellBehind() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (snapshot_queued_) {
      EndLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the agent reads too slowly: more than ",
                       max_backlog_bytes_,
                       " bytes of the set's changes queued for it")));
      // A peer that does not read would hold the stream (and its queue)
      // forever waiting for the write before the status: cancel it.
      ctx_->TryCancel();
      return false;
    }
    std::deque<Item> kept;
    queued_bytes_ = 0;
    for (Item& it : queue_) {
      if (it.shared) continue;
      queued_bytes_ += it.bytes.Length();
      kept.push_back(std::move(it));
    }
    queue_.swap(kept);
    grpc::ByteBuffer snapshot = Serialize(hub_->Resync(stream_));
    queued_bytes_ += snapshot.Length();
    queue_.push_back({std::move(snapshot), /*shared=*/false, /*resync=*/true});
    snapshot_queued_ = true;
    return true;
  }

  // The hello first (the hub's snapshot); then the hub's answer to each
  // message; held calls to their owner.
  absl::Status Receive(const v1::SyncUp& up) {
    absl::StatusOr<lease::Up> in = wire::FromProto(up);
    if (!in.ok()) return in.status();
    if (!opened_) {
      if (!in->hello.has_value()) {
        return absl::InvalidArgumentError(
            "hello: the first message of a stream must carry it");
      }
      const std::shared_ptr<const grpc::AuthContext> auth =
          ctx_->auth_context();
      absl::StatusOr<std::string> bound = BoundAgentId(
          auth != nullptr ? security::PeerOf(*auth) : security::AuthzPeer{},
          in->hello->agent_id);
      if (!bound.ok()) return bound.status();
      const std::string agent = *std::move(bound);
      if (absl::Status s = hub_->Open(*in, this, agent); !s.ok()) return s;
      opened_ = true;
      if (held_calls_) {
        std::shared_ptr<AgentHeldCalls> held = held_calls_(
            [this](v1::HeldAnswer a, absl::string_view endpoint) {
              EnqueueAnswer(std::move(a), endpoint);
            },
            agent);
        absl::MutexLock l(&mu_);
        held_ = std::move(held);
      }
    } else {
      absl::StatusOr<v1::SyncDown> d = hub_->Receive(stream(), *in);
      if (!d.ok()) return d.status();
      EnqueueOwn(*d);
    }
    return ReceiveHeld(up);
  }

  // The message's held calls: new ones, drops, unused releases.
  absl::Status ReceiveHeld(const v1::SyncUp& up) {
    if (up.holds_size() == 0 && up.drops_size() == 0 &&
        up.returns_size() == 0) {
      return absl::OkStatus();
    }
    std::shared_ptr<AgentHeldCalls> held;
    {
      absl::MutexLock l(&mu_);
      held = held_;
    }
    if (held == nullptr) {
      return absl::UnimplementedError("holds: this server holds no calls");
    }
    for (const v1::HeldAdmit& h : up.holds()) {
      if (absl::Status s = held->Hold(h); !s.ok()) return s;
    }
    for (uint64_t id : up.drops()) held->Drop(id);
    for (const v1::ReturnedRelease& r : up.returns()) {
      held->Return(r.endpoint(), r.admission());
    }
    return absl::OkStatus();
  }

  void EnqueueOwn(const v1::SyncDown& down) {
    if (Empty(down)) return;
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      if (own_queued_ >= SyncService::kMaxQueuedAnswers) {
        EndLocked(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("the agent sends but does not read: ",
                         SyncService::kMaxQueuedAnswers,
                         " answers to its messages queued for it")));
        ctx_->TryCancel();  // it would never read the status either
        return;
      }
      grpc::ByteBuffer bytes = Serialize(down);
      queued_bytes_ += bytes.Length();
      queue_.push_back({std::move(bytes), /*shared=*/false});
      ++own_queued_;
    }
    Pump();
  }

  // Answers share a message until the next write; they go first, and a
  // drain writes them all before the stream ends. One that can no longer
  // be written gives its probe back at once.
  void EnqueueAnswer(v1::HeldAnswer a, absl::string_view endpoint) {
    PendingAnswer p{std::move(a), std::string(endpoint)};
    bool dead;
    std::shared_ptr<AgentHeldCalls> held;
    {
      absl::MutexLock l(&mu_);
      dead = Dead();
      if (!dead) answers_.push_back(std::move(p));
      held = held_;
    }
    if (dead) return GiveBack(held.get(), {std::move(p)});
    Pump();
  }

  // The probes among answers that will never be written go back to the
  // engine, and their endpoints' lines are looked at: the next waiter
  // gets the probe now, not after probe_timeout. Outside mu_.
  void GiveBack(AgentHeldCalls* held,
                const std::vector<PendingAnswer>& unsent) {
    if (held == nullptr) return;
    for (const PendingAnswer& p : unsent) held->Unsent(p.answer, p.endpoint);
  }

  // Starts the next write if none is out, or the finish once all are out.
  void Pump() {
    bool write = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock l(&mu_);
      if (writing_) return;
      if (!answers_.empty() && !Dead()) {
        v1::SyncDown down;
        for (PendingAnswer& p : answers_) {
          *down.add_answers() = std::move(p.answer);
        }
        answers_.clear();
        current_ = Serialize(down);
        writing_ = write = true;
      } else if (!queue_.empty() && !finishing_ && !write_failed_) {
        Item& next = queue_.front();
        if (next.resync) snapshot_queued_ = false;
        if (!next.shared && !next.resync) --own_queued_;
        queued_bytes_ -= next.bytes.Length();
        current_ = std::move(next.bytes);
        queue_.pop_front();
        writing_ = write = true;
      } else if (finishing_ && !finished_) {
        finished_ = true;
        finish = status_;
      }
    }
    if (write) {
      Count(SyncService::Direction::kOut);
      StartWrite(&current_);
    } else if (finish.has_value()) {
      Finish(*finish);
    }
  }

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    status_ = std::move(status);
    queue_.clear();  // the set's messages: a new stream gets a snapshot
    queued_bytes_ = 0;
    own_queued_ = 0;
    // Answers still go out before an OK end (a drain); after any other
    // end they are given back in OnDone.
  }
  // Nothing more will be written: a write failed, the stream ended with an
  // error, or its status went out.
  bool Dead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return write_failed_ || finished_ || (finishing_ && !status_.ok()) ||
           ctx_->IsCancelled();
  }
  void EndWith(grpc::Status status) {
    {
      absl::MutexLock l(&mu_);
      EndLocked(std::move(status));
    }
    Pump();
  }

  grpc::CallbackServerContext* const ctx_;
  SyncHub* const hub_;
  const SyncService::Counter* const count_;
  const size_t max_backlog_bytes_;
  const SyncService::HeldCallsFactory& held_calls_;
  // Made when the hello came; null: no held calls here.
  std::shared_ptr<AgentHeldCalls> held_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer in_;  // the read in progress (reads are serial)
  bool opened_ = false;  // the hello came (read side)
  absl::Mutex mu_;
  uint64_t stream_ ABSL_GUARDED_BY(mu_) = 0;  // the hub's id for it
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Answers to its own messages in queue_ (not pushes nor the resync).
  size_t own_queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool snapshot_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<PendingAnswer> answers_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_;  // the write in progress
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

SyncService::SyncService(SyncHub* hub, Counter count,
                         size_t max_backlog_bytes)
    : hub_(hub),
      count_(std::move(count)),
      max_backlog_bytes_(max_backlog_bytes) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SyncService::Sync(
    grpc::CallbackServerContext* ctx) {
  return new SyncStream(ctx, hub_, &count_, max_backlog_bytes_, held_calls_);
}

}  // namespace stagger::service
