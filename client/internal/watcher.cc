// The Watcher of client/watch.h: one thread and one stream per member.
#include <algorithm>
#include <climits>
#include <deque>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/internal/target_parser.h"
#include "client/watch.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/watch.grpc.pb.h"

namespace stagger::client {
namespace {

using google::protobuf::util::TimeUtil;

constexpr const char* kKindNames[] = {
    "",                 "BREAKER_OPENED",   "BREAKER_HALF_OPEN",
    "BREAKER_CLOSED",   "RETRY_AFTER_SET",  "RETRY_AFTER_ENDED",
    "PAUSED",           "RESUMED",          "DISABLED",
    "ENABLED",          "RELEASE_STARTED",  "RELEASE_FINISHED"};
static_assert(sizeof(kKindNames) / sizeof(kKindNames[0]) ==
              kNumEventKinds + 1);
static_assert(kNumEventKinds == v1::EventKind_MAX);

// Operator events remembered for de-duplication.
constexpr size_t kRemembered = 10000;

absl::Time TimeOf(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return absl::InfinitePast();
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
}

// "OPEN_CAUSE_CONSECUTIVE_FAILURES" -> "CONSECUTIVE_FAILURES".
std::string Stripped(const std::string& name, absl::string_view prefix) {
  if (!absl::StartsWith(name, prefix)) return "";
  return name.substr(prefix.size());
}

std::string Json(const v1::WatchEvent& e) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(e, &out, o).ok()) return "{}";
  return out;
}

WatchEvent FromProto(const v1::WatchEvent& e) {
  WatchEvent out;
  out.sequence = e.sequence();
  out.incarnation = e.incarnation();
  out.replica = e.replica();
  out.at = TimeOf(e.at());
  out.kind = static_cast<EventKind>(e.kind());
  out.endpoint = e.endpoint();
  out.prefix = e.pause().target().prefix();
  if (e.open_cause() != v1::OPEN_CAUSE_UNSPECIFIED) {
    out.open_cause = Stripped(v1::OpenCause_Name(e.open_cause()), "OPEN_CAUSE_");
  }
  out.open_until = TimeOf(e.open_until());
  out.retry_after_until = TimeOf(e.retry_after_until());
  out.release_pace = e.release_pace();
  out.pause_until = TimeOf(e.pause().until());
  out.pause_id = e.pause().pause_id();
  out.reason = e.has_pause() ? e.pause().reason() : e.disabled().reason();
  if (e.has_disabled()) {
    out.disable_trigger = Stripped(
        v1::DisableTrigger_Name(e.disabled().trigger()), "DISABLE_TRIGGER_");
  }
  out.by = e.by();
  out.operation_id = e.operation_id();
  out.forgotten = e.forgotten();
  out.ran_out = e.ran_out();
  out.json = Json(e);
  return out;
}

class WatcherImpl : public Watcher {
 public:
  WatcherImpl(WatchOptions options, std::vector<Member> members,
              OnEvent on_event, OnNotice on_notice)
      : options_(std::move(options)),
        on_event_(std::move(on_event)),
        on_notice_(std::move(on_notice)) {
    tokens_ = options_.resume_tokens;
    for (Member& m : members) {
      auto stream = std::make_unique<Stream>();
      stream->member = std::move(m);
      stream->channel = Channel(stream->member.target);
      streams_.push_back(std::move(stream));
    }
    for (auto& s : streams_) {
      s->thread = std::thread([this, st = s.get()] { Run(*st); });
    }
  }
  ~WatcherImpl() override { Stop(); }

  void Stop() override {
    if (!stop_.HasBeenNotified()) stop_.Notify();
    for (auto& s : streams_) {
      {
        absl::MutexLock l(&s->mu);
        if (s->ctx != nullptr) s->ctx->TryCancel();
      }
      if (s->thread.joinable()) s->thread.join();
    }
  }

  std::map<std::string, std::string> resume_tokens() const override {
    absl::MutexLock l(&mu_);
    return tokens_;
  }

 private:
  struct Stream {
    Member member;
    std::shared_ptr<grpc::Channel> channel;
    std::thread thread;
    absl::Mutex mu;
    grpc::ClientContext* ctx ABSL_GUARDED_BY(mu) = nullptr;
  };

  std::shared_ptr<grpc::Channel> Channel(const std::string& target) const {
    grpc::ChannelArguments args;
    const int backoff_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(options_.reconnect_backoff), 100, INT_MAX));
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, backoff_ms);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, backoff_ms);
    if (!options_.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options_.tls_server_name);
    }
    return grpc::CreateCustomChannel(
        target,
        options_.credentials != nullptr ? options_.credentials
                                        : grpc::InsecureChannelCredentials(),
        args);
  }

  v1::WatchRequest RequestFor(const Stream& s) {
    v1::WatchRequest req;
    req.set_prefix(options_.prefix);
    for (EventKind k : options_.kinds) {
      req.add_kinds(static_cast<v1::EventKind>(k));
    }
    absl::MutexLock l(&mu_);
    auto it = tokens_.find(s.member.name);
    if (it != tokens_.end()) {
      req.set_resume_token(it->second);
    } else {
      req.set_replay_history(options_.replay_history);
    }
    return req;
  }

  // Whether `e` is an operator's event already delivered from another
  // replica (remembers it if not).
  bool Seen(const v1::WatchEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(deliver_mu_) {
    if (!options_.deduplicate || e.operation_id().empty()) return false;
    std::string key = absl::StrCat(e.operation_id(), "/", e.kind(), "/",
                                   e.endpoint(), "/",
                                   e.pause().target().prefix());
    if (!seen_.insert(key).second) return true;
    order_.push_back(std::move(key));
    if (order_.size() > kRemembered) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return false;
  }

  void Notice(WatchNotice n) {
    if (!on_notice_) return;
    absl::MutexLock l(&deliver_mu_);
    if (!stop_.HasBeenNotified()) on_notice_(n);
  }

  void Deliver(const Stream& s, const v1::WatchResponse& m) {
    {
      absl::MutexLock l(&deliver_mu_);
      if (stop_.HasBeenNotified()) return;
      for (const v1::WatchEvent& e : m.events()) {
        if (!Seen(e)) on_event_(FromProto(e));
      }
    }
    absl::MutexLock l(&mu_);
    tokens_[s.member.name] = m.resume_token();
  }

  void Resync(const Stream& s, const v1::WatchResponse& m) {
    WatchNotice n;
    n.kind = WatchNotice::Kind::kResync;
    n.member = s.member.name;
    n.target = s.member.target;
    n.incarnation = m.incarnation();
    n.detail = v1::Resync::Cause_Name(m.resync().cause());
    n.missed_from = m.resync().missed_from();
    n.missed_to = m.resync().missed_to();
    Notice(std::move(n));
  }

  // One call to the member until it ends; its status.
  grpc::Status Once(Stream& s) {
    grpc::ClientContext ctx;
    {
      absl::MutexLock l(&s.mu);
      if (stop_.HasBeenNotified()) return grpc::Status::CANCELLED;
      s.ctx = &ctx;
    }
    auto stub = v1::EndpointWatch::NewStub(s.channel);
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub->Watch(&ctx, RequestFor(s));
    v1::WatchResponse m;
    bool first = true;
    while (reader->Read(&m)) {
      if (first) {
        first = false;
        WatchNotice n;
        n.kind = WatchNotice::Kind::kConnected;
        n.member = s.member.name;
        n.target = s.member.target;
        n.incarnation = m.incarnation();
        Notice(std::move(n));
      }
      if (m.has_resync()) Resync(s, m);
      Deliver(s, m);
    }
    grpc::Status status = reader->Finish();
    absl::MutexLock l(&s.mu);
    s.ctx = nullptr;
    return status;
  }

  void Run(Stream& s) {
    while (!stop_.HasBeenNotified()) {
      const grpc::Status status = Once(s);
      if (stop_.HasBeenNotified()) return;
      WatchNotice n;
      n.kind = WatchNotice::Kind::kDisconnected;
      n.member = s.member.name;
      n.target = s.member.target;
      n.detail = status.ok() ? "the stream ended"
                             : absl::StrCat(status.error_code(), ": ",
                                            status.error_message());
      Notice(std::move(n));
      stop_.WaitForNotificationWithTimeout(options_.reconnect_backoff);
    }
  }

  const WatchOptions options_;
  const OnEvent on_event_;
  const OnNotice on_notice_;
  absl::Notification stop_;
  std::vector<std::unique_ptr<Stream>> streams_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> tokens_ ABSL_GUARDED_BY(mu_);
  absl::Mutex deliver_mu_;  // one callback at a time
  absl::flat_hash_set<std::string> seen_ ABSL_GUARDED_BY(deliver_mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(deliver_mu_);
};

}  // namespace

const char* EventKindName(EventKind k) {
  const int i = static_cast<int>(k);
  return i >= 1 && i <= kNumEventKinds ? kKindNames[i] : "EVENT_KIND_UNSPECIFIED";
}

std::optional<EventKind> ParseEventKind(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (absl::StartsWith(upper, "EVENT_")) upper = upper.substr(6);
  for (int i = 1; i <= kNumEventKinds; ++i) {
    if (upper == kKindNames[i]) return static_cast<EventKind>(i);
  }
  return std::nullopt;
}

const char* WatchNoticeKindName(WatchNotice::Kind k) {
  switch (k) {
    case WatchNotice::Kind::kConnected: return "connected";
    case WatchNotice::Kind::kResync: return "resync";
    case WatchNotice::Kind::kDisconnected: return "disconnected";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Watcher>> Watcher::Start(WatchOptions options,
                                                        OnEvent on_event,
                                                        OnNotice on_notice) {
  if (options.reconnect_backoff <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reconnect_backoff: must be > 0");
  }
  absl::StatusOr<MemberSpec> spec = ParseMembers(options.target);
  if (!spec.ok()) return spec.status();
  std::vector<Member> members = spec->members;
  if (!spec->dns_host.empty()) {
    absl::StatusOr<std::vector<Member>> resolved =
        ResolveDnsMembers(spec->dns_host, spec->dns_port);
    if (!resolved.ok()) return resolved.status();
    members = *std::move(resolved);
  }
  return std::unique_ptr<Watcher>(new WatcherImpl(
      std::move(options), SortedByName(std::move(members)),
      std::move(on_event), std::move(on_notice)));
}

}  // namespace stagger::client
