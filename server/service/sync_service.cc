#include "server/service/sync_service.h"

#include <atomic>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/lease/sync_messages.h"
#include "core/wire/sync_wire.h"

namespace stagger::service {
namespace {

absl::Status CheckHello(const v1::SyncUp& up) {
  if (!up.has_hello()) {
    return absl::InvalidArgumentError(
        "hello: the first message of a stream must carry it");
  }
  const v1::AgentHello& h = up.hello();
  if (h.agent_id().empty() || h.agent_id().size() > lease::kMaxAgentIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.agent_id: must be 1..", lease::kMaxAgentIdBytes,
                     " bytes, got ", h.agent_id().size()));
  }
  if (h.incarnation() == 0) {
    return absl::InvalidArgumentError("hello.incarnation: must not be 0");
  }
  return absl::OkStatus();
}

// One agent's stream. Lifetime: a reference for gRPC (dropped in OnDone)
// and one per hub call in progress (SyncPeer).
class SyncStream final : public grpc::ServerBidiReactor<v1::SyncUp, v1::SyncDown>,
                         public SyncPeer {
 public:
  SyncStream(LeaseHub* hub, const SyncService::Counter* count,
             const SyncService::HeldCallsFactory& held_calls)
      : hub_(hub), count_(count) {
    if (held_calls) {
      held_ = held_calls(
          [this](v1::HeldAnswer a) { EnqueueAnswer(std::move(a)); });
    }
    StartRead(&up_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return EndWith(grpc::Status::OK);  // the agent closed
    Count(SyncService::Direction::kIn);
    if (absl::Status s = Receive(); !s.ok()) {
      return EndWith(grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                                  std::string(s.message())));
    }
    StartRead(&up_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      if (!ok) queue_.clear();  // the stream is going away
    }
    Pump();
  }

  // gRPC runs OnDone after Finish, but may hand it to its executor inside
  // uninstrumented libgrpc++ (docs/SANITIZERS.md), an order ThreadSanitizer
  // cannot see. Taking mu_ first makes it visible: Finish is only called
  // after Pump held mu_, so OnDone sees everything the read and write sides
  // did before it (attached_, agent_, the queue).
  void OnDone() override {
    { absl::MutexLock l(&mu_); }
    if (held_ != nullptr) held_->Close();  // sends nothing more to us
    if (attached_) hub_->Detach(agent_, this);
    Unref();
  }
  // The last reference may be dropped on a thread that never took mu_ (a
  // hub call's Unref); taking it here orders the queue's destruction after
  // every locked use of it.
  ~SyncStream() override { absl::MutexLock l(&mu_); }

  void PushRevokes(std::vector<lease::LeaseRevoke> revokes) override {
    v1::SyncDown down;
    for (const lease::LeaseRevoke& r : revokes) {
      wire::ToProto(r, down.add_revokes());
    }
    Enqueue(std::move(down));
  }
  void End() override { EndWith(grpc::Status::OK); }
  void Ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  void Count(SyncService::Direction d) {
    if (*count_) (*count_)(d);
  }

  // The hello first; then the hub's answer to each message.
  absl::Status Receive() {
    if (!attached_) {
      if (absl::Status s = CheckHello(up_); !s.ok()) return s;
      agent_ = {up_.hello().agent_id(), up_.hello().incarnation()};
      if (!hub_->Attach(agent_, this)) {
        return absl::UnavailableError("draining");
      }
      attached_ = true;
      PushRevokes(hub_->PendingRevokes(agent_));
    }
    if (absl::Status s = ReceiveHeld(); !s.ok()) return s;
    absl::StatusOr<v1::SyncDown> down = hub_->Handle(agent_, up_);
    if (!down.ok()) return down.status();
    if (down->applied_seq() != 0 || down->grants_size() > 0) {
      Enqueue(*std::move(down));
    }
    return absl::OkStatus();
  }

  // The message's held calls: new ones, drops, unused releases.
  absl::Status ReceiveHeld() {
    if (up_.holds_size() == 0 && up_.drops_size() == 0 &&
        up_.returns_size() == 0) {
      return absl::OkStatus();
    }
    if (held_ == nullptr) {
      return absl::UnimplementedError("holds: this server holds no calls");
    }
    for (const auto& [name, n] :
         {std::pair<const char*, int>{"holds", up_.holds_size()},
          {"drops", up_.drops_size()},
          {"returns", up_.returns_size()}}) {
      if (static_cast<size_t>(n) > lease::kMaxItemsPerMessage) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": at most ", lease::kMaxItemsPerMessage,
                         " per message, got ", n));
      }
    }
    for (const v1::HeldAdmit& h : up_.holds()) {
      if (absl::Status s = held_->Hold(h); !s.ok()) return s;
    }
    for (uint64_t id : up_.drops()) held_->Drop(id);
    for (const v1::ReturnedRelease& r : up_.returns()) {
      held_->Return(r.endpoint(), r.admission());
    }
    return absl::OkStatus();
  }

  // Answers share a message while it waits for its write.
  void EnqueueAnswer(v1::HeldAnswer a) {
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      if (!queue_.empty() && queue_.back().answers_size() > 0 &&
          static_cast<size_t>(queue_.back().answers_size()) <
              kAnswersPerMessage) {
        *queue_.back().add_answers() = std::move(a);
        return;
      }
      v1::SyncDown down;
      *down.add_answers() = std::move(a);
      queue_.push_back(std::move(down));
    }
    Pump();
  }

  void Enqueue(v1::SyncDown down) {
    if (down.ByteSizeLong() == 0) return;
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      queue_.push_back(std::move(down));
    }
    Pump();
  }

  // Starts the next write if none is out, or the finish once all are out.
  void Pump() {
    bool write = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock l(&mu_);
      if (writing_) return;
      if (!queue_.empty() && !finishing_) {
        current_ = std::move(queue_.front());
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

  void EndWith(grpc::Status status) {
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      finishing_ = true;
      status_ = std::move(status);
      queue_.clear();
    }
    Pump();
  }

  static constexpr size_t kAnswersPerMessage = 1000;

  LeaseHub* const hub_;
  const SyncService::Counter* const count_;
  std::shared_ptr<AgentHeldCalls> held_;  // null: no held calls here
  std::atomic<int> refs_{1};
  v1::SyncUp up_;              // the read in progress (reads are serial)
  lease::AgentKey agent_;      // set with the hello (read side only)
  bool attached_ = false;      // read side only, and OnDone after it
  absl::Mutex mu_;
  std::deque<v1::SyncDown> queue_ ABSL_GUARDED_BY(mu_);
  v1::SyncDown current_;       // the write in progress
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

SyncService::SyncService(LeaseHub* hub, Counter count)
    : hub_(hub), count_(std::move(count)) {}

grpc::ServerBidiReactor<v1::SyncUp, v1::SyncDown>* SyncService::Sync(
    grpc::CallbackServerContext* ctx) {
  return new SyncStream(hub_, &count_, held_calls_);
}

}  // namespace stagger::service
