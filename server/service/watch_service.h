// WatchService: the gRPC adapter for stagger.v1.EndpointWatch
// (proto/stagger/v1/watch.proto): one server-streaming call per watcher,
// over this replica's change log (watch_log.h).
//
// A stream starts at its request's resume_token (from the event after
// the one that token covered), or now, or at the oldest event held
// (replay_history). Its first message goes at once (events or not: the
// watcher learns the replica, the incarnation and a token). Then every
// message carries up to kMaxEventsPerMessage events that pass the
// request's filters, and a token right after what it covered; a message
// with no events comes after kHeartbeat of quiet. A token of another
// incarnation is told as Resync RESTARTED (delivery goes on from the
// oldest event held); one past the history as EXPIRED; a watcher that
// falls behind the history while connected as SLOW (counted,
// stagger_watch_resyncs_total). One write in flight per stream: a slow
// watcher never holds the log or other streams back.
//
// Refused: a malformed token, a prefix over kMaxPrefixBytes, an unknown
// kind (INVALID_ARGUMENT naming the field); more than kMaxStreams streams
// (RESOURCE_EXHAUSTED). Shutdown() ends every stream UNAVAILABLE (the
// drain, before the port closes) and refuses new ones.
//
// One thread (the pump) wakes the idle streams when events arrive and for
// heartbeats. Thread-safe; `log` (and `metrics`, nullable) outlive it.
#ifndef STAGGER_SERVER_SERVICE_WATCH_SERVICE_H_
#define STAGGER_SERVER_SERVICE_WATCH_SERVICE_H_

#include <cstddef>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/metrics/server_metrics.h"
#include "server/service/watch_log.h"
#include "stagger/v1/watch.grpc.pb.h"

namespace stagger::service {

class WatchService final : public v1::EndpointWatch::CallbackService {
 public:
  static constexpr size_t kMaxEventsPerMessage = 256;
  static constexpr absl::Duration kHeartbeat = absl::Seconds(10);
  static constexpr size_t kMaxStreams = 1000;
  static constexpr size_t kMaxPrefixBytes = 4096;

  WatchService(WatchLog* log, metrics::ServerMetrics* metrics);
  ~WatchService() override;

  grpc::ServerWriteReactor<v1::WatchResponse>* Watch(
      grpc::CallbackServerContext* ctx, const v1::WatchRequest* req) override;

  void Shutdown();
  size_t streams() const;

  // The filter a request asks for; InvalidArgument naming the field.
  static absl::StatusOr<WatchLog::Filter> FilterOf(const v1::WatchRequest& r);

 private:
  class Stream;
  void Pump();
  void Remove(Stream* s);

  WatchLog* const log_;
  metrics::ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread pump_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WATCH_SERVICE_H_
