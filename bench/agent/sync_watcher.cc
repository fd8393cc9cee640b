#include "bench/agent/sync_watcher.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/agent/steady_now.h"

namespace stagger::bench {

SyncWatcher::SyncWatcher(Options options) : o_(std::move(options)) {}

SyncWatcher::~SyncWatcher() { Stop(); }

absl::Status SyncWatcher::Start(absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetInt("stagger.sync_watcher.channel", o_.channel_index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      o_.target, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 absl::ToChronoNanoseconds(timeout))) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", o_.target, " within ",
                     absl::FormatDuration(timeout)));
  }
  stub_ = v1::AgentSync::NewStub(channel);
  stream_ = stub_->Sync(&ctx_);
  v1::SyncUp hello;
  v1::AgentHello* h = hello.mutable_hello();
  h->set_agent_id(o_.agent_id);
  h->set_incarnation(o_.incarnation);
  h->set_protocol(2);
  h->set_next_count_seq(1);
  {
    absl::MutexLock lock(&mu_);
    hello.set_number(++number_);
  }
  if (!stream_->Write(hello)) {
    return absl::UnavailableError("the stream ended before its hello went");
  }
  reader_ = std::thread([this] { ReadLoop(); });
  writer_ = std::thread([this] { WriteLoop(); });
  return absl::OkStatus();
}

void SyncWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (stream_ != nullptr) ctx_.TryCancel();
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

void SyncWatcher::ReadLoop() {
  v1::SyncDown down;
  while (stream_->Read(&down)) {
    const int64_t now = NowNs();
    absl::MutexLock lock(&mu_);
    messages_.push_back({now, static_cast<int64_t>(down.ByteSizeLong())});
    Apply(down, now);
  }
  absl::MutexLock lock(&mu_);
  if (!stop_) ended_ = "the replica ended the stream";
  done_ = true;
}

void SyncWatcher::Apply(const v1::SyncDown& down, int64_t now) {
  if (down.renewed() != 0) leased_ = true;
  if (!down.refusal().empty()) refusal_ = down.refusal();
  if (down.has_snapshot()) {
    const v1::SetSnapshot& s = down.snapshot();
    incarnation_ = s.incarnation();
    version_ = s.version();
    held_.clear();
    for (const v1::NotClear& e : s.entries()) Added(e, now);
    resync_ = false;
  }
  if (down.has_delta()) {
    const v1::SetDelta& d = down.delta();
    if (d.incarnation() != incarnation_ || version_ < d.from_version() ||
        version_ >= d.to_version()) {
      if (version_ < d.from_version()) resync_ = true;  // a gap
      return;
    }
    for (const v1::NotClearTarget& t : d.removed()) held_.erase(t.target());
    for (const v1::NotClear& e : d.added()) {
      if (held_.contains(e.target().target())) ++readded_;
      Added(e, now);
    }
    version_ = d.to_version();
    if (d.added_size() > 0) ack_due_ = true;
  }
}

void SyncWatcher::Added(const v1::NotClear& e, int64_t now) {
  held_.insert(e.target().target());
  arrived_.try_emplace(e.target().target(), now);
}

void SyncWatcher::WriteLoop() {
  absl::Time next = absl::Now() + o_.flush_interval;
  while (true) {
    v1::SyncUp up;
    {
      absl::MutexLock lock(&mu_);
      const auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || done_ || ack_due_ || resync_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next);
      if (stop_ || done_) return;
      ack_due_ = false;
      up.set_number(++number_);
      up.set_acked_incarnation(incarnation_);
      up.set_acked_version(version_);
      if (resync_) {
        up.set_resync(true);
        resync_ = false;
      }
    }
    if (absl::Now() >= next) next = absl::Now() + o_.flush_interval;
    if (!stream_->Write(up)) return;
  }
}

bool SyncWatcher::leased() const {
  absl::MutexLock lock(&mu_);
  return leased_;
}

std::string SyncWatcher::refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

std::string SyncWatcher::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

std::optional<int64_t> SyncWatcher::ArrivedAt(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  const auto it = arrived_.find(key);
  if (it == arrived_.end()) return std::nullopt;
  return it->second;
}

size_t SyncWatcher::CountArrived(const std::vector<std::string>& keys) const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const std::string& k : keys) n += arrived_.contains(k) ? 1 : 0;
  return n;
}

std::vector<SyncWatcher::Message> SyncWatcher::messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

int64_t SyncWatcher::readded() const {
  absl::MutexLock lock(&mu_);
  return readded_;
}

}  // namespace stagger::bench
