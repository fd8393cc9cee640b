#include "server/service/watch_service.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/rpc/raw_unary.h"

namespace stagger::service {

// One watcher's stream: a cursor in the log, at most one write in flight.
class WatchService::Stream : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  Stream(WatchService* service, WatchLog::Filter filter, uint64_t from,
         std::optional<v1::Resync::Cause> told)
      : service_(service),
        filter_(std::move(filter)),
        next_(from),
        restarted_(told) {}

  // Sends what is due (events, a gap, the first message, a heartbeat)
  // unless a write is in flight or the stream is finished.
  void Poke(absl::Time now) {
    bool resync = false;
    {
      absl::MutexLock l(&mu_);
      if (writing_ || finishing_) return;
      WatchLog* log = service_->log_;
      WatchLog::Page page = log->Read(next_, filter_, kMaxEventsPerMessage);
      const bool missed = page.missed_from != 0;
      next_ = page.next;
      if (!first_ && page.events.empty() && !missed &&
          now - last_sent_ < kHeartbeat) {
        return;
      }
      out_.Clear();
      for (v1::WatchEvent& e : page.events) *out_.add_events() = std::move(e);
      out_.set_resume_token(log->TokenFor(page.next));
      out_.set_replica(log->replica());
      out_.set_incarnation(log->incarnation());
      if (first_ && restarted_.has_value()) {
        out_.mutable_resync()->set_cause(*restarted_);
        resync = true;
      } else if (missed) {
        v1::Resync* r = out_.mutable_resync();
        r->set_cause(first_ ? v1::Resync::EXPIRED : v1::Resync::SLOW);
        r->set_missed_from(page.missed_from);
        r->set_missed_to(page.missed_to);
        resync = true;
      }
      first_ = false;
      last_sent_ = now;
      writing_ = true;
    }
    if (resync && service_->metrics_ != nullptr) {
      service_->metrics_->RecordWatchResync();
    }
    StartWrite(&out_);
  }

  // Finishes the call once (after the write in flight, if any).
  void End(const grpc::Status& status) {
    {
      absl::MutexLock l(&mu_);
      if (finishing_) return;
      finishing_ = true;
      if (writing_) {
        pending_ = status;
        return;
      }
    }
    Finish(status);
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> pending;
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      pending.swap(pending_);
    }
    if (pending.has_value()) {
      Finish(*pending);
      return;
    }
    if (!ok) {
      End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    Poke(absl::Now());
  }

  void OnCancel() override {
    End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the watcher"));
  }

  void OnDone() override {
    service_->Remove(this);
    delete this;
  }

 private:
  WatchService* const service_;
  const WatchLog::Filter filter_;
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::Resync::Cause> restarted_;
  bool first_ ABSL_GUARDED_BY(mu_) = true;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  v1::WatchResponse out_;  // the message in flight
};

namespace {

// A call refused before it started.
class Refused : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  explicit Refused(const grpc::Status& s) { Finish(s); }
  void OnDone() override { delete this; }
};

}  // namespace

WatchService::WatchService(WatchLog* log, metrics::ServerMetrics* metrics)
    : log_(log), metrics_(metrics) {
  pump_ = std::thread([this] { Pump(); });
}

WatchService::~WatchService() {
  Shutdown();
  if (pump_.joinable()) pump_.join();
}

absl::StatusOr<WatchLog::Filter> WatchService::FilterOf(
    const v1::WatchRequest& r) {
  WatchLog::Filter f;
  if (r.prefix().size() > kMaxPrefixBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix: ", r.prefix().size(), " bytes, over the limit of ",
                     kMaxPrefixBytes));
  }
  f.prefix = r.prefix();
  for (int i = 0; i < r.kinds_size(); ++i) {
    const int k = r.kinds(i);
    if (k <= v1::EVENT_KIND_UNSPECIFIED || k > v1::EventKind_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("kinds[", i, "]: unknown kind ", k));
    }
    f.kinds |= uint32_t{1} << k;
  }
  return f;
}

grpc::ServerWriteReactor<v1::WatchResponse>* WatchService::Watch(
    grpc::CallbackServerContext*, const v1::WatchRequest* req) {
  absl::StatusOr<WatchLog::Filter> filter = FilterOf(*req);
  if (!filter.ok()) return new Refused(rpc::ToGrpcStatus(filter.status()));
  uint64_t from = req->replay_history() ? log_->oldest() : log_->next_sequence();
  std::optional<v1::Resync::Cause> told;
  if (!req->resume_token().empty()) {
    absl::StatusOr<WatchLog::Position> pos =
        WatchLog::ParseToken(req->resume_token());
    if (!pos.ok()) return new Refused(rpc::ToGrpcStatus(pos.status()));
    if (pos->incarnation == log_->incarnation()) {
      from = pos->next;
    } else {
      from = log_->oldest();
      told = v1::Resync::RESTARTED;
    }
  }
  Stream* s = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (shutdown_) {
      return new Refused(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "staggerd is draining"));
    }
    if (streams_.size() >= kMaxStreams) {
      return new Refused(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("at most ", kMaxStreams, " watch streams at once")));
    }
    s = new Stream(this, *std::move(filter), from, told);
    streams_.insert(s);
    s->Poke(absl::Now());  // the first message at once
  }
  if (metrics_ != nullptr) metrics_->AddWatchStreams(1);
  return s;
}

void WatchService::Remove(Stream* s) {
  {
    absl::MutexLock l(&mu_);
    streams_.erase(s);
  }
  if (metrics_ != nullptr) metrics_->AddWatchStreams(-1);
}

void WatchService::Pump() {
  uint64_t seen = log_->next_sequence();
  while (true) {
    log_->WaitForNew(seen, absl::Now() + absl::Seconds(1));
    absl::MutexLock l(&mu_);
    if (shutdown_) return;
    seen = log_->next_sequence();
    const absl::Time now = absl::Now();
    for (Stream* s : streams_) s->Poke(now);
  }
}

void WatchService::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    shutdown_ = true;
    for (Stream* s : streams_) {
      s->End(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "staggerd is draining"));
    }
  }
  log_->WakeWaiters();  // the pump ends now, not at its next second
}

size_t WatchService::streams() const {
  absl::MutexLock l(&mu_);
  return streams_.size();
}

}  // namespace stagger::service
