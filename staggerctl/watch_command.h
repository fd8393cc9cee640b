// `staggerctl watch`: the watch (proto/stagger/v1/watch.proto) of every
// replica in --address at once, through the client library's Watcher
// (client/watch.h), until SIGINT or SIGTERM (exit 0).
//
//  - stdout: one line per event, or with --json the event's JSON (proto
//    field names) on one line:
//      2026-12-07T05:46:11.12Z stagger-0 #12 BREAKER_OPENED https://a/x cause=CONSECUTIVE_FAILURES until=...
//  - stderr: what the streams do (connected, a resync with the numbers
//    missed, disconnected and why: it keeps trying).
//  - --prefix, --kinds K,... (EventKind names, any case), --history (the
//    replicas' history first), --resume_file FILE (each replica's token,
//    one "NAME TOKEN" line per replica: read at start, written every
//    second and at exit; so a restart repeats at most about a second of
//    events and misses none the replicas still hold).
// Exit codes: 0 after a signal; 2 bad usage (operands, an unknown kind, a
// bad --address, an unreadable resume file).
#ifndef STAGGER_STAGGERCTL_WATCH_COMMAND_H_
#define STAGGER_STAGGERCTL_WATCH_COMMAND_H_

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "staggerctl/commands.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace stagger::staggerctl {

struct WatchFlags {
  std::string kinds;        // --kinds
  bool history = false;     // --history
  std::string resume_file;  // --resume_file
};

// Runs until SIGINT/SIGTERM; the caller has blocked them
// (cli::BlockHandledSignals) before any thread started.
int RunWatch(const std::vector<std::string>& args, const CommandOptions& o,
             const WatchFlags& w,
             std::shared_ptr<grpc::ChannelCredentials> credentials,
             const std::string& tls_server_name, std::ostream& out,
             std::ostream& err);

}  // namespace stagger::staggerctl

#endif  // STAGGER_STAGGERCTL_WATCH_COMMAND_H_
