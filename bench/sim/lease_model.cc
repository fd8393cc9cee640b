#include "bench/sim/lease_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::sim {

LeaseNetwork::LeaseNetwork(const LeaseModel& m, engine::Engine* engine,
                           const engine::Clock* clock, Hooks hooks,
                           PolicyResult* counters)
    : m_(m),
      engine_(engine),
      clock_(clock),
      hooks_(std::move(hooks)),
      counters_(counters),
      latency_ns_(Ns(m.push_latency)),
      ledger_(lease::LeaseLedger::Options{m.ttl}, clock->Now() - m.ttl) {
  for (int a = 0; a < m.agents; ++a) {
    auto agent = std::make_unique<Agent>();
    agent->key = {absl::StrCat("agent-", a), 1};
    agent->deaf = a < m.deaf_agents;
    agent_index_[agent->key] = a;
    agents_.push_back(std::move(agent));
  }
  // As staggerd's LeaseHub::ProbeHeld.
  engine_->set_probe_hold([this](absl::string_view key, absl::Time now) {
    return ledger_.AnyRevoking() && ledger_.ProbeBlocked(key, now);
  });
}

LeaseNetwork::~LeaseNetwork() { engine_->set_probe_hold(nullptr); }

void LeaseNetwork::Start() {
  const int64_t now = VirtualNs(Now());
  const int64_t every = Ns(m_.flush_interval);
  for (int a = 0; a < m_.agents; ++a) {
    hooks_.push(now + every * (a + 1) / m_.agents, a, EventType::kFlush);
  }
}

std::optional<engine::Decision> LeaseNetwork::Admit(
    int agent, const engine::AdmitInput& in, absl::BitGenRef rng) {
  std::optional<engine::Decision> d = agents_[agent]->book.Admit(in, Now(), rng);
  if (d.has_value()) {
    ++counters_->local_admits;
  } else if (in.attempt == 1) {
    Nudge(agent);  // a lease is wanted: ask soon
  }
  return d;
}

std::optional<engine::Decision> LeaseNetwork::Report(
    int agent, const engine::ReportInput& in) {
  std::optional<engine::Decision> d = agents_[agent]->book.Report(in, Now());
  if (d.has_value()) ++counters_->local_reports;
  return d;
}

bool LeaseNetwork::FlushFor(int agent, absl::string_view endpoint) {
  std::optional<lease::CountReport> r =
      agents_[agent]->book.TakeCountsFor(endpoint);
  if (!r.has_value()) return false;
  Message m;
  m.agent = agent;
  m.outgoing.counts = *std::move(r);
  Send(std::move(m));
  return true;
}

void LeaseNetwork::OnFailureReported(absl::string_view endpoint) {
  // As LeaseHub::OnEndpointChanged: one revoke message per holder.
  if (!ledger_.HasHolders(endpoint)) return;
  if (engine_->LeaseTermsFor(endpoint).clear) return;
  absl::flat_hash_map<int, Message> by_agent;
  for (lease::LeaseLedger::Notice& n : ledger_.Revoke(endpoint, Now())) {
    const int agent = agent_index_.at(n.agent);
    Message& m = by_agent[agent];
    m.agent = agent;
    m.up = false;
    m.revokes.push_back(std::move(n.revoke));
    ++counters_->lease_revokes;
  }
  for (int a = 0; a < m_.agents; ++a) {
    auto it = by_agent.find(a);
    if (it != by_agent.end()) Send(std::move(it->second));
  }
}

void LeaseNetwork::Nudge(int agent) {
  Agent& a = *agents_[agent];
  if (a.nudge_pending) return;
  a.nudge_pending = true;
  hooks_.push(std::max(VirtualNs(Now()), VirtualNs(a.quiet_until)), agent,
              EventType::kNudge);
}

void LeaseNetwork::Send(Message m) {
  ++(m.up ? counters_->sync_up : counters_->sync_down);
  int id;
  if (free_messages_.empty()) {
    id = static_cast<int>(messages_.size());
    messages_.push_back(std::move(m));
  } else {
    id = free_messages_.back();
    free_messages_.pop_back();
    messages_[id] = std::move(m);
  }
  hooks_.push(VirtualNs(Now()) + latency_ns_, id, EventType::kMessage);
}

absl::Status LeaseNetwork::OnEvent(const Event& e) {
  const int id = static_cast<int>(e.id);
  switch (e.type) {
    case EventType::kFlush:
    case EventType::kNudge: {
      Agent& a = *agents_[id];
      const bool flush = e.type == EventType::kFlush;
      if (!flush) a.nudge_pending = false;
      lease::LeaseBook::Outgoing out = a.book.TakeOutgoing(Now(), flush);
      if (!out.empty()) {
        Message m;
        m.agent = id;
        m.outgoing = std::move(out);
        Send(std::move(m));
      } else if (!flush) {
        a.quiet_until = Now() + kNudge;
      }
      if (flush && !hooks_.done()) {
        hooks_.push(e.t_ns + Ns(m_.flush_interval), id, EventType::kFlush);
      }
      return absl::OkStatus();
    }
    case EventType::kMessage: {
      const Message m = std::move(messages_[id]);
      free_messages_.push_back(id);
      if (m.up) {
        ArriveUp(m);
      } else {
        ArriveDown(m);
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("lease network: not its event");
  }
}

void LeaseNetwork::ArriveUp(const Message& m) {
  const lease::AgentKey& key = agents_[m.agent]->key;
  for (const lease::LeaseAck& a : m.outgoing.acks) ledger_.Ack(key, a);
  Message down;
  down.agent = m.agent;
  down.up = false;
  if (m.outgoing.counts.has_value()) {
    ApplyCounts(key, *m.outgoing.counts);
    down.applied_seq = m.outgoing.counts->seq;
  }
  for (const std::string& endpoint : m.outgoing.asks) {
    const engine::LeaseTerms terms = engine_->LeaseTermsFor(endpoint);
    if (std::optional<lease::LeaseGrant> g =
            ledger_.Grant(key, endpoint, terms, /*owned=*/true, Now())) {
      down.grants.push_back(*std::move(g));
      ++counters_->lease_grants;
    }
  }
  if (down.applied_seq != 0 || !down.grants.empty()) Send(std::move(down));
}

void LeaseNetwork::ApplyCounts(const lease::AgentKey& key,
                               const lease::CountReport& r) {
  if (!ledger_.ShouldApply(key, r.seq)) return;
  for (const lease::EndpointCounts& e : r.endpoints) {
    engine_->ApplyLateCounts(e.endpoint, e.buckets);
    const bool successes =
        std::any_of(e.buckets.begin(), e.buckets.end(),
                    [](const engine::LateCounts& b) { return b.successes > 0; });
    if (successes) hooks_.wake(e.endpoint);
  }
}

void LeaseNetwork::ArriveDown(const Message& m) {
  Agent& a = *agents_[m.agent];
  if (m.applied_seq != 0) a.book.OnApplied(m.applied_seq);
  for (const lease::LeaseGrant& g : m.grants) a.book.OnGrant(g, Now());
  if (m.revokes.empty() || a.deaf) return;
  for (const lease::LeaseRevoke& r : m.revokes) a.book.OnRevoke(r);
  Nudge(m.agent);  // acknowledge soon
}

}  // namespace stagger::sim
