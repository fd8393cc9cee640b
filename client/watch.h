// Watcher: every transition of every endpoint, from every replica of a
// coordinator, as one stream of events (proto/stagger/v1/watch.proto;
// docs/API.md, "The watch"). What a platform's notifier or dashboard
// builds on; `staggerctl watch` prints it.
//
//   client::WatchOptions o;
//   o.target = "stagger-0=10.0.0.5:50051,stagger-1=10.0.0.6:50051";
//   o.kinds = {client::EventKind::kDisabled, client::EventKind::kEnabled};
//   auto w = client::Watcher::Start(
//       o, [](const client::WatchEvent& e) { Notify(e); },
//       [](const client::WatchNotice& n) { Log(n); });
//   ...
//   SaveTokens((*w)->resume_tokens());  // give them back to the next Start
//
// Contract:
//  - One stream per member of `target` (ClientOptions::target's forms; a
//    dns:/// target is resolved once, at Start), each on its own thread,
//    reconnecting every reconnect_backoff while it is down, with the
//    token after the last message it got: nothing within the replica's
//    history is missed across a reconnect.
//  - Callbacks run one at a time (never concurrently), each member's
//    events in their order. An event an operator's command made on every
//    replica (a pause, a resume, a disable, an enable: same operation_id)
//    is delivered once, unless `deduplicate` is false.
//  - Notices: kConnected (a stream is up: member, incarnation), kResync
//    (the replica says events were missed: RESTARTED, EXPIRED, SLOW, with
//    the numbers missed), kDisconnected (a stream ended or could not be
//    opened, with why; it is retried).
//  - resume_tokens(): each member's token after what was delivered.
//  - Stop() (and the destructor) cancels the streams and joins the
//    threads; no callback runs after it returns.
// Thread-safe.
#ifndef STAGGER_CLIENT_WATCH_H_
#define STAGGER_CLIENT_WATCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace stagger::client {

// Values equal watch.proto's EventKind.
enum class EventKind : uint8_t {
  kBreakerOpened = 1,
  kBreakerHalfOpen = 2,
  kBreakerClosed = 3,
  kRetryAfterSet = 4,
  kRetryAfterEnded = 5,
  kPaused = 6,
  kResumed = 7,
  kDisabled = 8,
  kEnabled = 9,
  kReleaseStarted = 10,
  kReleaseFinished = 11,
};
inline constexpr int kNumEventKinds = 11;
// "BREAKER_OPENED", ... (watch.proto's name without EVENT_).
const char* EventKindName(EventKind k);
// The kind named `name` (any case, with or without EVENT_); nullopt if
// none.
std::optional<EventKind> ParseEventKind(absl::string_view name);

struct WatchEvent {
  uint64_t sequence = 0;
  uint64_t incarnation = 0;
  std::string replica;
  absl::Time at = absl::InfinitePast();
  EventKind kind = EventKind::kBreakerOpened;
  std::string endpoint;  // empty for a prefix pause's events
  std::string prefix;    // a prefix pause's prefix
  // BREAKER_OPENED: why ("CONSECUTIVE_FAILURES", "FAILURE_RATIO",
  // "PROBE_FAILED", "OPERATOR", "" if unknown) and until when.
  std::string open_cause;
  absl::Time open_until = absl::InfinitePast();
  absl::Time retry_after_until = absl::InfinitePast();  // RETRY_AFTER_SET
  double release_pace = 0;  // RELEASE_*: deliveries per second
  // PAUSED / RESUMED: the pause's end, id; its reason (or a disable's).
  absl::Time pause_until = absl::InfinitePast();
  std::string pause_id;
  std::string reason;
  // DISABLED: "OPERATOR", "UNAVAILABLE" or "PERMANENT_FAILURES".
  std::string disable_trigger;
  std::string by;            // the operator, for an operator's action
  std::string operation_id;  // the operator's command (a pause's id)
  bool forgotten = false;
  bool ran_out = false;
  // The whole event as the coordinator's JSON (watch.proto's field names,
  // every field), one line: what `staggerctl watch --json` prints.
  std::string json;
};

struct WatchNotice {
  enum class Kind : uint8_t { kConnected, kResync, kDisconnected };
  Kind kind = Kind::kConnected;
  std::string member;  // its name (client/coordinator_target.h)
  std::string target;
  uint64_t incarnation = 0;  // kConnected, kResync
  // kResync: "RESTARTED", "EXPIRED" or "SLOW"; kDisconnected: why.
  std::string detail;
  uint64_t missed_from = 0;  // kResync: the numbers not delivered
  uint64_t missed_to = 0;
};
const char* WatchNoticeKindName(WatchNotice::Kind k);  // "connected", ...

struct WatchOptions {
  std::string target = "127.0.0.1:50051";
  // Null: plaintext (client::MakeChannelCredentials for TLS).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string tls_server_name;
  // Filters (watch.proto's WatchRequest): a key prefix; kinds (empty:
  // every kind).
  std::string prefix;
  std::vector<EventKind> kinds;
  // A member with no token starts with the history its replica holds.
  bool replay_history = false;
  // Member name -> a token from resume_tokens(): start right after it.
  std::map<std::string, std::string> resume_tokens;
  // How long a member's stream waits before it is opened again. > 0.
  absl::Duration reconnect_backoff = absl::Seconds(1);
  bool deduplicate = true;
};

class Watcher {
 public:
  using OnEvent = std::function<void(const WatchEvent&)>;
  using OnNotice = std::function<void(const WatchNotice&)>;
  // InvalidArgument for a bad target or backoff; Unavailable if a dns:///
  // target resolves to nothing. `on_notice` may be empty.
  static absl::StatusOr<std::unique_ptr<Watcher>> Start(WatchOptions options,
                                                        OnEvent on_event,
                                                        OnNotice on_notice);
  virtual ~Watcher() = default;
  virtual void Stop() = 0;
  virtual std::map<std::string, std::string> resume_tokens() const = 0;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_WATCH_H_
