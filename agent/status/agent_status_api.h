// AgentStatusApi: the JSON endpoints of stagger-agent's status page,
// read-only. What it reports comes from a LeaseSource (the agent's
// CoordinatorClient::lease_status: each replica's lease stream read under
// its own lock, one pass over its copy of the set, never calling anyone) and
// a DecisionTally (atomic counters and a DecisionRing); nothing here
// touches the decision path's state or holds a lock a decision waits on
// for longer than such a pass.
//
//   GET /api/agent      ?page_size=1..kMaxPageSize&after=TARGET
//     {"now", "agent_id", "coordinator" (--coordinator), "fallback"
//      ("fail_open"|"fail_closed"), "leases_on", "coordinator_up" (some
//      replica takes calls),
//      "replicas": [{"name", "target", "up", "serving", "stream"
//        ("UP"|"DOWN"|"OFF"), "incarnation" (decimal string: 64 bits),
//        "lease_state" (LeaseState below), "leased", "lease_left_ms",
//        "in_sync", "set_version" (decimal string), "not_clear" (entries
//        of its set), "refusal", "flushes", "reconnects", "held_calls"}],
//      "flushes", "reconnects", "held_calls" (over the replicas),
//      "waiting_calls", "waiting_overflows",
//      "decisions": {"lease"|"coordinator"|"fallback": {"PROCEED", "DEFER",
//        "GIVE_UP", "DONE"}} since start,
//      "not_clear": [{"target", "scope" ("endpoint"|"prefix"|"member"),
//        "why", "replica", "until" (or null)}] in (target, replica) order,
//        after `after`: what the coordinators decide, not this agent,
//      "page_size", "after", "not_clear_matched" (entries after `after`),
//      "left_out" (matched, not on this page), "next_after" (the `after`
//      of the next page; "" when none)}
//     A page holds at most page_size entries and never splits a target's
//     entries (a prefix pause is in every replica's set, under one
//     target): it ends before the target that would not fit, so the next
//     page, after the last target shown, loses none. Only when one
//     target's entries outnumber page_size does a page hold more: all of
//     them (at most 3 scopes per replica).
//   GET /api/decisions  DecisionsJson (core/status/decisions_json.h) of the tally's
//                       ring: the chart, as staggerd's api/decisions
//
// A query it refuses (core/http/query_string.h: unknown or repeated
// parameters, bad escapes, control characters, a page size out of range)
// is a 400 with {"error": "query: ..."}. Thread-safe; `tally` and `clock`
// must outlive it.
#ifndef STAGGER_AGENT_STATUS_AGENT_STATUS_API_H_
#define STAGGER_AGENT_STATUS_AGENT_STATUS_API_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "agent/status/decision_tally.h"
#include "client/lease_status.h"
#include "core/engine/clock.h"
#include "core/http/http_server.h"

namespace stagger::agent {

// The agent's waiting Admits now (agent_service.h).
struct WaitingCounts {
  int64_t held = 0;       // held at once now
  int64_t overflows = 0;  // answered at once for want of room, so far
};

// What the agent was started with, shown as is, and where its waiting
// calls are counted (null: none shown).
struct AgentInfo {
  std::string coordinator;  // --coordinator
  std::string fallback;     // --fallback
  bool leases = true;       // --leases
  std::function<WaitingCounts()> waiting;
};

// What one replica's stream lease does for this agent now, in the order
// it is decided:
//   "OFF"          no lease stream to it (--leases=false)
//   "LIVE"         leased, the copy of its set current: its keys the set
//                  does not cover are answered here
//   "REFUSED"      it grants this stream no lease; `refusal` says why
//   "OUT_OF_DATE"  the copy of its set is not current (a gap, or no
//                  snapshot yet): its keys go to the coordinator until one
//                  comes, a live lease or not
//   "STREAM_DOWN"  the stream is down and no lease runs on
//   "NOT_GRANTED"  stream up, copy current, no renewal: the replica's
//                  learning period (its first ttl after a start, at least
//                  its longest probe_timeout), or this copy lacks a
//                  version every other lease holds
const char* LeaseState(const client::ReplicaStatus& r);

// The replicas and up to `max` not-clear entries after `after`:
// CoordinatorClient::lease_status in the agent, a fake in tests.
using LeaseSource =
    std::function<client::LeaseStatus(absl::string_view after, size_t max)>;

class AgentStatusApi {
 public:
  static constexpr int kDefaultPageSize = 100;
  static constexpr int kMaxPageSize = 1000;

  AgentStatusApi(AgentInfo info, LeaseSource leases,
                 const DecisionTally* tally, const engine::Clock* clock)
      : info_(std::move(info)),
        leases_(std::move(leases)),
        tally_(tally),
        clock_(clock) {}

  http::HttpResponse Agent(absl::string_view query) const;
  http::HttpResponse Decisions(absl::string_view query) const;

  // The routes above, for HttpServer.
  void AddRoutes(http::HttpRoutes* routes) const;

 private:
  const AgentInfo info_;
  const LeaseSource leases_;
  const DecisionTally* const tally_;
  const engine::Clock* const clock_;
};

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_STATUS_AGENT_STATUS_API_H_
