#include "agent/status/agent_status_api.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/decision.h"
#include "core/http/json.h"
#include "core/http/query_string.h"
#include "core/status/decisions_json.h"

namespace stagger::agent {
namespace {

using http::HttpResponse;
using http::JsonString;
using http::JsonTime;

HttpResponse Ok(std::string json) {
  return {200, "application/json", std::move(json)};
}

HttpResponse Refused(const absl::Status& s) {
  return {400, "application/json", http::JsonError(s.message())};
}

const char* Bool(bool b) { return b ? "true" : "false"; }

const char* StreamState(const client::ReplicaStatus& r) {
  if (!r.stream) return "OFF";
  return r.stream_connected ? "UP" : "DOWN";
}

}  // namespace

const char* LeaseState(const client::ReplicaStatus& r) {
  if (!r.stream) return "OFF";
  if (r.leased && r.in_sync) return "LIVE";
  if (!r.refusal.empty()) return "REFUSED";
  if (!r.in_sync && (r.stream_connected || r.leased)) return "OUT_OF_DATE";
  if (!r.stream_connected) return "STREAM_DOWN";
  return "NOT_GRANTED";
}

namespace {

std::string Replica(const client::ReplicaStatus& r) {
  return absl::StrCat(
      "{\"name\":", JsonString(r.name), ",\"target\":", JsonString(r.target),
      ",\"up\":", Bool(r.up), ",\"serving\":", Bool(r.serving),
      ",\"stream\":\"", StreamState(r), "\",\"incarnation\":\"", r.incarnation,
      "\",\"lease_state\":\"", LeaseState(r),
      "\",\"leased\":", Bool(r.leased), ",\"lease_left_ms\":",
      absl::ToInt64Milliseconds(r.lease_left), ",\"in_sync\":",
      Bool(r.in_sync), ",\"set_version\":\"", r.set_version,
      "\",\"not_clear\":", r.not_clear, ",\"refusal\":",
      JsonString(r.refusal), ",\"flushes\":", r.flushes,
      ",\"reconnects\":", r.reconnects, ",\"held_calls\":", r.held_calls,
      "}");
}

std::string Entry(const client::NotClearEntry& e) {
  return absl::StrCat(
      "{\"target\":", JsonString(e.target), ",\"scope\":",
      JsonString(e.scope), ",\"why\":", JsonString(e.why),
      ",\"replica\":", JsonString(e.replica), ",\"until\":",
      e.until == absl::InfinitePast() ? "null" : JsonTime(e.until), "}");
}

// One page of `source`'s entries after `after`: at most `page_size`, but
// never a target's entries split over two pages (the next page starts
// after a target). A page that would end inside a target's run ends
// before it; if that run fills the page, the page takes all of it.
client::LeaseStatus EntryPage(const LeaseSource& source,
                              absl::string_view after, size_t page_size) {
  for (size_t ask = page_size + 1;; ask *= 2) {
    client::LeaseStatus s = source(after, ask);
    std::vector<client::NotClearEntry>& e = s.not_clear;
    if (e.size() <= page_size) return s;
    const std::string& first_out = e[page_size].target;
    size_t end = page_size;
    while (end > 0 && e[end - 1].target == first_out) --end;
    if (end == 0) {  // the run fills the page: to its end, if it is here
      end = page_size;
      while (end < e.size() && e[end].target == first_out) ++end;
      if (end == e.size() && e.size() == ask) continue;
    }
    e.resize(end);
    return s;
  }
}

// {"lease": {"PROCEED": n, ...}, "coordinator": {...}, "fallback": {...}}
std::string DecisionCounts(const DecisionTally::Counts& c) {
  // In client::DecisionSource order (1..3).
  static constexpr const char* kSourceNames[DecisionTally::kSources] = {
      "coordinator", "fallback", "lease"};
  std::string out = "{";
  for (int s = 0; s < DecisionTally::kSources; ++s) {
    absl::StrAppend(&out, s == 0 ? "" : ",", "\"", kSourceNames[s], "\":{");
    for (int v = 0; v < DecisionTally::kVerdicts; ++v) {
      absl::StrAppend(
          &out, v == 0 ? "" : ",",
          JsonString(engine::VerdictName(static_cast<engine::Verdict>(v + 1))),
          ":", c[s][v]);
    }
    out.push_back('}');
  }
  out.push_back('}');
  return out;
}

}  // namespace

HttpResponse AgentStatusApi::Agent(absl::string_view query) const {
  auto params = http::ParseQueryString(query, {"page_size", "after"});
  if (!params.ok()) return Refused(params.status());
  absl::StatusOr<int> page_size = http::IntParam(
      *params, "page_size", 1, kMaxPageSize, kDefaultPageSize);
  if (!page_size.ok()) return Refused(page_size.status());
  const absl::string_view after = params->Get("after").value_or("");

  const absl::Time now = clock_->Now();
  const client::LeaseStatus s =
      EntryPage(leases_, after, static_cast<size_t>(*page_size));
  const WaitingCounts waiting = info_.waiting ? info_.waiting() : WaitingCounts{};
  std::string replicas, entries;
  bool any_up = false;
  int64_t flushes = 0, reconnects = 0, held_calls = 0;
  for (const client::ReplicaStatus& r : s.replicas) {
    absl::StrAppend(&replicas, replicas.empty() ? "" : ",", Replica(r));
    any_up = any_up || r.up;
    flushes += r.flushes;
    reconnects += r.reconnects;
    held_calls += r.held_calls;
  }
  for (const client::NotClearEntry& e : s.not_clear) {
    absl::StrAppend(&entries, entries.empty() ? "" : ",", Entry(e));
  }
  const int64_t shown = static_cast<int64_t>(s.not_clear.size());
  const int64_t left_out = std::max<int64_t>(0, s.not_clear_matched - shown);
  const std::string next_after =
      left_out > 0 && !s.not_clear.empty() ? s.not_clear.back().target : "";
  return Ok(absl::StrCat(
      "{\"now\":", JsonTime(now), ",\"agent_id\":", JsonString(s.holder_id),
      ",\"coordinator\":", JsonString(info_.coordinator),
      ",\"fallback\":", JsonString(info_.fallback),
      ",\"leases_on\":", Bool(info_.leases), ",\"coordinator_up\":",
      Bool(any_up), ",\"replicas\":[", replicas, "],\"flushes\":", flushes,
      ",\"reconnects\":", reconnects, ",\"held_calls\":", held_calls,
      ",\"waiting_calls\":", waiting.held,
      ",\"waiting_overflows\":", waiting.overflows,
      ",\"decisions\":", DecisionCounts(tally_->Read()), ",\"not_clear\":[",
      entries, "],\"page_size\":", *page_size, ",\"after\":", JsonString(after),
      ",\"not_clear_matched\":", s.not_clear_matched, ",\"left_out\":", left_out,
      ",\"next_after\":", JsonString(next_after), "}"));
}

HttpResponse AgentStatusApi::Decisions(absl::string_view query) const {
  if (auto params = http::ParseQueryString(query, {}); !params.ok()) {
    return Refused(params.status());
  }
  return Ok(status::DecisionsJson(tally_->ring().Read()));
}

void AgentStatusApi::AddRoutes(http::HttpRoutes* routes) const {
  (*routes)["/api/agent"] = [this](absl::string_view q) { return Agent(q); };
  (*routes)["/api/decisions"] = [this](absl::string_view q) {
    return Decisions(q);
  };
}

}  // namespace stagger::agent
