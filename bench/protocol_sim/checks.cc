#include "bench/protocol_sim/checks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stagger::protocol_sim {
namespace {

std::string Secs(absl::Duration d) {
  return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(d));
}

}  // namespace

void Checks::Fail(const char* invariant, std::string what, absl::Duration at) {
  if (violation_.has_value()) return;  // the first one is the story
  violation_ = Violation{invariant, std::move(what), at};
}

void Checks::ProbeSent(int key, uint64_t probe, absl::Duration at) {
  ++probes_;
  probes_in_flight_[key][probe] = at;
  probe_key_[probe] = key;
}

void Checks::ProbeAnswered(uint64_t probe) {
  auto it = probe_key_.find(probe);
  if (it == probe_key_.end()) return;
  probes_in_flight_[it->second].erase(probe);
  probe_key_.erase(it);
}

void Checks::LocalSent(int key, int agent, absl::Duration at) {
  ++local_sends_;
  auto it = probes_in_flight_.find(key);
  if (it == probes_in_flight_.end() || it->second.empty()) return;
  Fail("I1",
       absl::StrCat("agent ", agent, " sent an attempt to key ", key,
                    " admitted under its lease while a probe sent at ",
                    Secs(it->second.begin()->second), " was in flight"),
       at);
}

void Checks::CopyAt(int agent, int replica, uint64_t incarnation,
                    uint64_t version, absl::Duration at) {
  auto [it, fresh] = copies_.try_emplace({agent, replica},
                                         std::make_pair(incarnation, version));
  if (fresh) return;
  auto& [inc, ver] = it->second;
  if (inc == incarnation && version < ver) {
    Fail("I2",
         absl::StrCat("agent ", agent, "'s copy of replica ", replica,
                      "'s set went back from version ", ver, " to ", version),
         at);
  }
  if (inc != incarnation || version > ver) {
    inc = incarnation;
    ver = version;
  }
}

void Checks::Acked(int agent, int replica, uint64_t incarnation,
                   uint64_t version, uint64_t sent_max, absl::Duration at) {
  if (version > sent_max) {
    Fail("I2",
         absl::StrCat("agent ", agent, " acknowledged version ", version,
                      " of replica ", replica, " (incarnation ", incarnation,
                      ") but was sent only up to ", sent_max),
         at);
  }
}

void Checks::ReportSent(const std::string& agent, int member, uint64_t seq,
                        uint64_t lost) {
  Reports& r = reports_[{agent, member}];
  r.max_sent = std::max(r.max_sent, seq);
  for (uint64_t i = 1; i <= lost && i < seq; ++i) r.lost.insert(seq - i);
}

void Checks::ReportApplied(const std::string& agent, int member,
                           uint64_t replica_incarnation, uint64_t seq,
                           uint64_t lost, absl::Duration at) {
  Reports& r = reports_[{agent, member}];
  if (!r.applied_by.insert({replica_incarnation, seq}).second) {
    Fail("I3",
         absl::StrCat("count report ", seq, " of ", agent,
                      " was applied twice by replica ", member,
                      " (incarnation ", replica_incarnation, ")"),
         at);
  }
  r.applied.insert(seq);
  for (uint64_t i = 1; i <= lost && i < seq; ++i) r.lost.insert(seq - i);
}

void Checks::CountGap(const std::string& what, absl::Duration at) {
  Fail("I3", absl::StrCat("a replica found a gap in count reports: ", what),
       at);
}

void Checks::RunUndone(int key, absl::Duration last_success,
                       absl::Duration last_failure, absl::Duration at) {
  Fail("I3",
       absl::StrCat("late successes on key ", key, " (the last at ",
                    Secs(last_success), ") ended a run of failures whose last ",
                    "came at ", Secs(last_failure)),
       at);
}

void Checks::SettleCounts(const std::set<std::string>& alive_agents) {
  for (const auto& [who, r] : reports_) {
    if (alive_agents.count(who.first) == 0) continue;
    for (uint64_t seq = 1; seq <= r.max_sent; ++seq) {
      if (r.applied.count(seq) > 0 || r.lost.count(seq) > 0) continue;
      Fail("I3",
           absl::StrCat("count report ", seq, " of ", who.first,
                        " to replica ", who.second,
                        " was never applied, and its loss never declared"),
           absl::ZeroDuration());
      return;
    }
  }
}

void Checks::Stuck(int delivery, const std::string& state, absl::Duration at) {
  Fail("progress",
       absl::StrCat("delivery ", delivery, " never ended (", state, ")"), at);
}

void Checks::HeldAnswered(uint64_t call, absl::Duration at, bool cancelled,
                          bool worker_cancelled) {
  auto it = held_due_.find(call);
  if (it == held_due_.end()) {
    return Fail("I4", absl::StrCat("held call ", call,
                                   " was answered a second time"),
                at);
  }
  ++held_calls_;
  const absl::Duration due = it->second;
  held_due_.erase(it);
  if (at > due) {
    return Fail("I4", absl::StrCat("held call ", call, " was answered at ",
                                   Secs(at), ", after its give-up time ",
                                   Secs(due)),
                at);
  }
  if (cancelled && !worker_cancelled) {
    Fail("I4", absl::StrCat("held call ", call,
                            " was answered CANCELLED, but its worker had "
                            "not cancelled it (it was not sent on)"),
         at);
  }
}

void Checks::ReplicaAnswered(uint64_t stream, uint64_t id, absl::Duration at) {
  if (!replica_answered_.insert({stream, id}).second) {
    Fail("I4", absl::StrCat("a replica answered held call id ", id,
                            " of stream ", stream, " twice"),
         at);
  }
}

void Checks::SettleHeld(absl::Duration at) {
  if (held_due_.empty()) return;
  Fail("I4", absl::StrCat("held call ", held_due_.begin()->first,
                          " was never answered (due ",
                          Secs(held_due_.begin()->second), ")"),
       at);
}

void Checks::ProbeKept(int replica, int key, absl::Duration dropped_at,
                       absl::Duration at) {
  Fail("I5", absl::StrCat("replica ", replica, " still holds the probe slot"
                          " of key ", key, " whose answer its stream never "
                          "wrote at ", Secs(dropped_at), " (",
                          absl::FormatDuration(at - dropped_at), " later)"),
       at);
}

}  // namespace stagger::protocol_sim
