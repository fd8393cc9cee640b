#include "client/internal/sync_session.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "core/wire/sync_wire.h"
#include "core/wire/wire.h"

namespace stagger::client {
namespace {

// A stream that stayed up this long starts the next backoff afresh.
constexpr absl::Duration kHealthyStream = absl::Seconds(10);

lease::AgentLink::Options LinkOptions(const SyncSession::Options& o) {
  lease::AgentLink::Options out;
  out.agent_id = o.agent_id;
  out.incarnation = o.incarnation;
  out.members = o.members;
  out.flush_interval = o.flush_interval;
  return out;
}

}  // namespace

SyncSession::SyncSession(std::shared_ptr<grpc::Channel> channel,
                         Options options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      link_(LinkOptions(options_)) {
  writer_ = std::thread([this] { Run(); });
  answerer_ = std::thread([this] { Answerer(); });
}

// The session's end is the stream's: its held calls go another way
// (UNAVAILABLE), unless their caller is closing.
SyncSession::~SyncSession() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  writer_.join();
  answerer_.join();
  {
    absl::MutexLock l(&mu_);
    held_.EndAllLeft();
  }
  RunFinished();
}

std::optional<uint64_t> SyncSession::Hold(v1::AdmitRequest request,
                                          absl::Time answer_by,
                                          HeldDone done) {
  absl::StatusOr<absl::Duration> wait =
      wire::FromProto(request.wait(), "wait");
  const absl::Time now = absl::Now();
  absl::MutexLock l(&mu_);
  if (stop_ || broken_ || !connected() || !wait.ok() || WriteStuck(now)) {
    return std::nullopt;
  }
  if (std::min(now + *wait + kHeldGrace, answer_by) < held_.NextGiveUp()) {
    new_give_up_ = true;  // the answerer measures its wait again
  }
  const uint64_t id =
      held_.Hold(std::move(request), *wait, now, answer_by, std::move(done));
  nudged_ = true;
  return id;
}

void SyncSession::Drop(uint64_t id) {
  absl::MutexLock l(&mu_);
  held_.Drop(id);
  nudged_ = true;  // the answerer runs `done`; the writer sends the drop
}

bool SyncSession::WriteStuck(absl::Time now) const {
  return now - writing_since_ >= kStuckWrite;
}

void SyncSession::Answerer() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      // Hold's new give-up times make it measure its wait again.
      const auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || held_.HasFinished() || new_give_up_ ||
               held_.NextGiveUp() <= absl::Now();
      };
      mu_.AwaitWithTimeout(
          absl::Condition(&due),
          std::max(held_.NextGiveUp() - absl::Now(), absl::ZeroDuration()));
      if (stop_) return;  // the destructor ends what is left
      new_give_up_ = false;
      const size_t before = held_.size();
      held_.GiveUp(absl::Now());
      if (held_.size() != before) nudged_ = true;  // drops to send
    }
    RunFinished();
  }
}

int64_t SyncSession::held() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(held_.size());
}

void SyncSession::RunFinished() {
  std::vector<HeldBook::Finished> finished;
  {
    absl::MutexLock l(&mu_);
    finished = held_.TakeFinished();
  }
  for (HeldBook::Finished& f : finished) f.done(std::move(f.result));
}

void SyncSession::SetMembers(std::vector<std::string> members) {
  absl::MutexLock l(&mu_);
  const bool changed = link_.SetMembers(std::move(members));
  members_set_ = true;
  if (changed && ctx_ != nullptr) ctx_->TryCancel();  // a new hello
}

std::optional<engine::Decision> SyncSession::Admit(
    const engine::AdmitInput& in, absl::BitGenRef rng) {
  absl::MutexLock l(&mu_);
  return link_.Admit(in, Now(), rng);
}

std::optional<engine::Decision> SyncSession::Report(
    const engine::ReportInput& in) {
  absl::MutexLock l(&mu_);
  return link_.Report(in, Now());
}

bool SyncSession::LocalOk(absl::string_view key, absl::Time now) const {
  absl::MutexLock l(&mu_);
  return link_.LocalOk(key, now);
}

bool SyncSession::Current(absl::Time now) const {
  absl::MutexLock l(&mu_);
  return link_.Current(now);
}

bool SyncSession::StandsInFor(absl::string_view member) const {
  absl::MutexLock l(&mu_);
  return link_.StandsInFor(member);
}

std::optional<lease::NotClearEntry> SyncSession::Covering(
    absl::string_view key) const {
  absl::MutexLock l(&mu_);
  return link_.Covering(key);
}

lease::AgentLink::Status SyncSession::status() const {
  absl::MutexLock l(&mu_);
  return link_.status(Now());
}

lease::AgentLink::EntryPage SyncSession::ListEntries(absl::string_view after,
                                                    size_t max) const {
  absl::MutexLock l(&mu_);
  return link_.ListEntries(after, max);
}

bool SyncSession::FlushFor(absl::string_view endpoint,
                           absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  // Counts kept while the stream is down go with the next report on it.
  std::optional<lease::Up> up = link_.FlushFor(endpoint, Now());
  if (!up.has_value()) return true;
  const uint64_t seq = up->counts->seq;
  urgent_.push_back(*std::move(up));
  const auto applied = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return link_.Applied(seq) || broken_ || stop_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&applied), timeout);
  return link_.Applied(seq);
}

void SyncSession::Run() {
  std::unique_ptr<v1::AgentSync::Stub> stub = v1::AgentSync::NewStub(channel_);
  absl::BitGen gen;
  absl::Duration backoff = kMinBackoff;
  while (true) {
    const absl::Time started = absl::Now();
    Stream(stub);
    connected_.store(false, std::memory_order_relaxed);
    if (absl::Now() - started > kHealthyStream) backoff = kMinBackoff;
    const absl::Duration pause =
        backoff / 2 + absl::Nanoseconds(absl::Uniform<int64_t>(
                          gen, 0, absl::ToInt64Nanoseconds(backoff / 2) + 1));
    backoff = std::min(backoff * 2, options_.max_backoff);
    absl::MutexLock l(&mu_);
    const auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), pause)) return;
    reconnects_.fetch_add(1, std::memory_order_relaxed);
  }
}

void SyncSession::Stream(std::unique_ptr<v1::AgentSync::Stub>& stub) {
  grpc::ClientContext ctx;
  // Opens once the channel connects: no backoff after the replica is back.
  ctx.set_wait_for_ready(true);
  std::vector<lease::Up> first;
  {
    absl::MutexLock l(&mu_);
    const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || members_set_;
    };
    mu_.Await(absl::Condition(&ready));
    if (stop_) return;
    ctx_ = &ctx;
    broken_ = false;
    urgent_.clear();  // every report not yet applied is in OnOpen's list
    first = link_.OnOpen(Now());
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>> stream =
      stub->Sync(&ctx);
  std::thread reader([&] { Read(stream.get()); });
  v1::SyncUp up;
  bool ok = true;
  for (const lease::Up& u : first) {
    up.Clear();
    wire::ToProto(u, &up);
    ok = ok && stream->Write(up);
  }
  connected_.store(ok, std::memory_order_relaxed);
  while (ok && NextMessage(&up)) {
    if (up.ByteSizeLong() == 0) continue;
    ok = Write(stream.get(), up);
    if (ok) flushes_.fetch_add(1, std::memory_order_relaxed);
  }
  ctx.TryCancel();  // ends the reader's Read
  reader.join();
  stream->Finish();
  {
    absl::MutexLock l(&mu_);
    ctx_ = nullptr;
    connected_.store(false, std::memory_order_relaxed);
    link_.OnBroken();
    held_.EndAll(absl::UnavailableError("the stream to the coordinator broke"));
  }
  RunFinished();
}

bool SyncSession::Write(
    grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream,
    const v1::SyncUp& up) {
  {
    absl::MutexLock l(&mu_);
    writing_since_ = absl::Now();
  }
  const bool ok = stream->Write(up);
  absl::MutexLock l(&mu_);
  writing_since_ = absl::InfiniteFuture();
  return ok;
}

void SyncSession::Read(
    grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream) {
  v1::SyncDown down;
  while (stream->Read(&down)) {
    absl::StatusOr<lease::Down> in = wire::FromProto(down);
    {
      absl::MutexLock l(&mu_);
      // A message this client cannot read ends the stream (the writer
      // sees broken_): the next one starts from a snapshot.
      if (!in.ok()) break;
      link_.OnDown(*in, Now());
      nudged_ = true;  // something may be due sooner (an acknowledgement)
      for (const v1::HeldAnswer& a : down.answers()) held_.Answer(a);
    }
    if (down.answers_size() > 0) RunFinished();
  }
  absl::MutexLock l(&mu_);
  broken_ = true;
}

bool SyncSession::NextMessage(v1::SyncUp* up) {
  up->Clear();
  absl::MutexLock l(&mu_);
  while (true) {
    if (stop_ || broken_) return false;
    if (!urgent_.empty()) {
      wire::ToProto(urgent_.front(), up);
      urgent_.pop_front();
      return true;
    }
    // Held calls, drops and returns go at once.
    if (held_.FillUp(up)) {
      nudged_ = false;
      return true;
    }
    if (std::optional<lease::Up> u = link_.Poll(Now())) {
      wire::ToProto(*u, up);
      return true;
    }
    const auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || broken_ || nudged_ || !urgent_.empty() ||
             held_.HasOutgoing();
    };
    // The link's next due time is on its own clock; wait that long.
    const absl::Duration wait =
        std::max(absl::ZeroDuration(), link_.NextPoll() - Now());
    mu_.AwaitWithTimeout(absl::Condition(&due), wait);
    nudged_ = false;
  }
}

}  // namespace stagger::client
