#include "client/internal/sync_session.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "core/wire/sync_wire.h"

namespace stagger::client {
namespace {

// A stream that stayed up this long starts the next backoff afresh.
constexpr absl::Duration kHealthyStream = absl::Seconds(10);

void Fill(lease::LeaseBook::Outgoing& out, v1::SyncUp* up) {
  if (out.counts.has_value()) wire::ToProto(*out.counts, up->mutable_counts());
  for (std::string& key : out.asks) up->add_lease_asks(std::move(key));
  for (const lease::LeaseAck& a : out.acks) {
    wire::ToProto(a, up->add_lease_acks());
  }
}

}  // namespace

SyncSession::SyncSession(std::shared_ptr<grpc::Channel> channel,
                         Options options)
    : channel_(std::move(channel)), options_(std::move(options)) {
  writer_ = std::thread([this] { Run(); });
}

SyncSession::~SyncSession() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  writer_.join();
}

void SyncSession::Nudge() {
  absl::MutexLock l(&mu_);
  nudged_ = true;
}

bool SyncSession::FlushFor(absl::string_view endpoint,
                           absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  // Numbered and queued under the lock, so reports go out in seq order.
  std::optional<lease::CountReport> r = book_.TakeCountsFor(endpoint);
  if (!r.has_value()) return true;
  const uint64_t seq = r->seq;
  if (!connected()) return false;  // kept unacked: re-sent on reconnect
  urgent_.push_back(*std::move(r));
  const auto applied = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return applied_ >= seq || broken_ || stop_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&applied), timeout);
  return applied_ >= seq;
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
  ctx.set_wait_for_ready(false);
  std::vector<lease::CountReport> resend;
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    ctx_ = &ctx;
    broken_ = false;
    urgent_.clear();  // every unacked report is re-sent below
    resend = book_.Unacked();
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>> stream =
      stub->Sync(&ctx);
  std::thread reader([&] { Read(stream.get()); });
  v1::SyncUp up;
  up.mutable_hello()->set_agent_id(options_.agent_id);
  up.mutable_hello()->set_incarnation(options_.incarnation);
  bool ok = stream->Write(up);
  for (const lease::CountReport& r : resend) {
    up.Clear();
    wire::ToProto(r, up.mutable_counts());
    ok = ok && stream->Write(up);
  }
  connected_.store(ok, std::memory_order_relaxed);
  absl::Time next_flush = absl::Now() + options_.flush_interval;
  while (ok && NextMessage(&next_flush, &up)) {
    ok = stream->Write(up);
    if (ok) flushes_.fetch_add(1, std::memory_order_relaxed);
  }
  ctx.TryCancel();  // ends the reader's Read
  reader.join();
  stream->Finish();
  absl::MutexLock l(&mu_);
  ctx_ = nullptr;
}

void SyncSession::Read(
    grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream) {
  v1::SyncDown down;
  while (stream->Read(&down)) {
    const absl::Time now = options_.clock->Now();
    absl::MutexLock l(&mu_);
    if (down.applied_seq() != 0) {
      applied_ = std::max(applied_, down.applied_seq());
      book_.OnApplied(down.applied_seq());
    }
    for (const v1::LeaseGrant& g : down.grants()) {
      absl::StatusOr<lease::LeaseGrant> grant = wire::FromProto(g);
      if (grant.ok()) book_.OnGrant(*grant, now);
    }
    for (const v1::LeaseRevoke& r : down.revokes()) {
      book_.OnRevoke(wire::FromProto(r));
      nudged_ = true;  // acknowledge soon
    }
  }
  absl::MutexLock l(&mu_);
  broken_ = true;
}

bool SyncSession::NextMessage(absl::Time* next_flush, v1::SyncUp* up) {
  up->Clear();
  absl::MutexLock l(&mu_);
  while (true) {
    if (stop_ || broken_) return false;
    if (!urgent_.empty()) {
      wire::ToProto(urgent_.front(), up->mutable_counts());
      urgent_.pop_front();
      return true;
    }
    const absl::Time now = absl::Now();
    const bool flush = now >= *next_flush;
    if (flush || nudged_) {
      nudged_ = false;
      if (flush) *next_flush = now + options_.flush_interval;
      lease::LeaseBook::Outgoing out =
          book_.TakeOutgoing(options_.clock->Now(), flush);
      if (!out.empty()) {
        Fill(out, up);
        return true;
      }
      // A nudge just handled: coalesce the next ones over kNudge.
      mu_.AwaitWithTimeout(absl::Condition(+[](bool* b) { return *b; },
                                           &stop_),
                           std::min(kNudge, *next_flush - now));
      continue;
    }
    const auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || broken_ || nudged_ || !urgent_.empty();
    };
    mu_.AwaitWithDeadline(absl::Condition(&due), *next_flush);
  }
}

}  // namespace stagger::client
