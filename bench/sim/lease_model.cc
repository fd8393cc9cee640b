#include "bench/sim/lease_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::sim {

LeaseNetwork::LeaseNetwork(const LeaseModel& m, uint64_t seed,
                           engine::Engine* engine, const VirtualClock* clock,
                           Hooks hooks, PolicyResult* counters)
    : m_(m),
      engine_(engine),
      clock_(clock),
      hooks_(std::move(hooks)),
      counters_(counters),
      latency_ns_(Ns(m.push_latency)),
      replica_clock_(clock),
      members_{"stagger-0"} {
  lease::ReplicaSync::Options o;
  o.ttl = m.ttl;
  o.incarnation = 1;
  replica_clock_.set_back(kUpBefore);  // ReplicaSync starts then
  replica_ = std::make_unique<lease::ReplicaSync>(o, engine_, &replica_clock_);
  replica_clock_.set_back(absl::ZeroDuration());
  replica_->AttachToEngine();
  // This object relays the engine's condition changes to the replica and
  // schedules the tick that pushes them.
  engine_->set_condition_sink(this);
  replica_->set_counts_observer(
      [this](const lease::AgentKey&, const lease::CountReport& r) {
        for (const lease::EndpointCounts& e : r.endpoints) {
          for (const lease::CountBucket& b : e.buckets) {
            if (b.successes == 0) continue;
            to_wake_.push_back(e.endpoint);
            break;
          }
        }
      });
  agents_.resize(m.agents);
  for (int a = 0; a < m.agents; ++a) {
    lease::AgentLink::Options lo;
    lo.agent_id = absl::StrCat("agent-", a);
    lo.incarnation = 1;
    lo.members = members_;
    lo.flush_interval = m.flush_interval;
    agents_[a].link = std::make_unique<lease::AgentLink>(lo);
    agents_[a].deaf = a < m.deaf_agents;
    agents_[a].rng.seed(seed * 0x9E3779B97F4A7C15ull + 0x6167656e74ull + a);
  }
}

LeaseNetwork::~LeaseNetwork() {
  engine_->set_condition_sink(nullptr);
  engine_->set_probe_hold(nullptr);
  engine_->pauses().set_listener(nullptr);
}

void LeaseNetwork::Start() {
  const absl::Time now = Now();
  // The configuration's delta went out before any stream opened.
  (void)replica_->Tick();
  for (int a = 0; a < m_.agents; ++a) {
    // Opened now; its flushes spread over the interval as if it had opened
    // (agents - 1 - a) / agents of one earlier.
    const absl::Time opened =
        now - m_.flush_interval * (m_.agents - 1 - a) / m_.agents;
    for (lease::Up& up : agents_[a].link->OnOpen(opened)) {
      SendUp(a, std::move(up));
    }
    SchedulePoll(a);
  }
  ScheduleTick();
}

bool LeaseNetwork::MayAnswer(int agent, absl::string_view key) const {
  const lease::LinkView* const links[] = {agents_[agent].link.get()};
  return lease::MayAnswerLocally(links, members_, 0, key, Now());
}

std::optional<engine::Decision> LeaseNetwork::Admit(
    int agent, const engine::AdmitInput& in) {
  if (!MayAnswer(agent, in.endpoint)) return std::nullopt;
  std::optional<engine::Decision> d =
      agents_[agent].link->Admit(in, Now(), agents_[agent].rng);
  if (d.has_value()) ++counters_->local_admits;
  return d;
}

std::optional<engine::Decision> LeaseNetwork::Report(
    int agent, const engine::ReportInput& in) {
  if (!MayAnswer(agent, in.endpoint)) return std::nullopt;
  std::optional<engine::Decision> d = agents_[agent].link->Report(in, Now());
  if (d.has_value()) ++counters_->local_reports;
  return d;
}

bool LeaseNetwork::FlushFor(int agent, int delivery,
                            absl::string_view endpoint) {
  Agent& ag = agents_[agent];
  std::optional<lease::Up> up = ag.link->FlushFor(endpoint, Now());
  if (!up.has_value()) return false;
  Waiter w;
  w.agent = agent;
  w.seq = up->counts->seq;
  w.until_ns = NowNs() + Ns(kFlushWait);
  waiters_[delivery] = w;
  ag.waiting.push_back(delivery);
  SendUp(agent, *std::move(up));
  hooks_.push(w.until_ns, delivery, EventType::kReport);
  return true;
}

bool LeaseNetwork::ReportDue(int delivery) {
  auto it = waiters_.find(delivery);
  if (it == waiters_.end()) return false;
  if (!it->second.applied && NowNs() < it->second.until_ns) return false;
  std::vector<int>& waiting = agents_[it->second.agent].waiting;
  waiting.erase(std::find(waiting.begin(), waiting.end(), delivery));
  waiters_.erase(it);
  return true;
}

void LeaseNetwork::OnConditionChange(const engine::ConditionChange& c) {
  replica_->OnConditionChange(c);
  if (!ticking_) ScheduleTick();
}

// --- The network ---------------------------------------------------------

void LeaseNetwork::SendUp(int agent, lease::Up up) {
  ++counters_->sync_up;
  if (agents_[agent].quiet) return;  // lost
  Message m;
  m.agent = agent;
  m.up_message = std::move(up);
  Send(std::move(m));
}

void LeaseNetwork::SendDown(int agent,
                            std::shared_ptr<const lease::Down> down) {
  ++counters_->sync_down;
  if (down->renewed != 0) ++counters_->lease_renewals;
  Agent& ag = agents_[agent];
  if (down->delta.has_value()) {
    ++counters_->set_pushes;
    // The first set change that takes keys out of clear: quiet from now.
    if (ag.deaf && !down->delta->added.empty()) ag.quiet = true;
  }
  if (ag.quiet) return;  // lost
  Message m;
  m.agent = agent;
  m.up = false;
  m.down = std::move(down);
  Send(std::move(m));
}

void LeaseNetwork::Send(Message m) {
  int id;
  if (free_messages_.empty()) {
    id = static_cast<int>(messages_.size());
    messages_.push_back(std::move(m));
  } else {
    id = free_messages_.back();
    free_messages_.pop_back();
    messages_[id] = std::move(m);
  }
  // A constant latency and FIFO ties keep each agent's stream in order.
  hooks_.push(NowNs() + latency_ns_, id, EventType::kMessage);
}

absl::Status LeaseNetwork::OnEvent(const Event& e) {
  switch (e.type) {
    case EventType::kPoll: {
      Agent& ag = agents_[e.id];
      if (e.t_ns != ag.poll_at_ns) return absl::OkStatus();  // replaced
      ag.poll_at_ns = INT64_MAX;
      if (!hooks_.done()) Poll(static_cast<int>(e.id));
      return absl::OkStatus();
    }
    case EventType::kTick:
      if (e.t_ns != tick_at_ns_) return absl::OkStatus();  // replaced
      tick_at_ns_ = INT64_MAX;
      if (!hooks_.done()) Tick();
      return absl::OkStatus();
    case EventType::kMessage: {
      Message m = std::move(messages_[e.id]);
      free_messages_.push_back(static_cast<int>(e.id));
      if (m.up) return ArriveUp(m.agent, m.up_message);
      ArriveDown(m.agent, *m.down);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("lease network: not its event");
  }
}

absl::Status LeaseNetwork::ArriveUp(int agent, const lease::Up& up) {
  to_wake_.clear();
  absl::StatusOr<lease::Down> down;
  if (up.hello.has_value()) {
    absl::StatusOr<lease::ReplicaSync::Opened> o = replica_->Open(up);
    if (o.ok()) {
      agents_[agent].stream = o->stream;
      down = std::move(o->first);
    } else {
      down = o.status();
    }
  } else {
    down = replica_->Receive(agents_[agent].stream, up);
  }
  if (!down.ok()) {
    return absl::InternalError(absl::StrCat(
        "the replica refused agent ", agent, "'s message: ",
        down.status().message()));
  }
  // As staggerd: the wait room's line of an endpoint whose counts carried
  // successes looks again (after the engine learned them).
  std::vector<std::string> wake;
  wake.swap(to_wake_);
  for (const std::string& key : wake) hooks_.wake(key);
  if (down->renewed != 0 || down->applied_seq != 0 ||
      down->snapshot.has_value() || !down->refusal.empty()) {
    SendDown(agent, std::make_shared<const lease::Down>(*std::move(down)));
  }
  return absl::OkStatus();
}

void LeaseNetwork::ArriveDown(int agent, const lease::Down& down) {
  Agent& ag = agents_[agent];
  ag.link->OnDown(down, Now());
  for (int delivery : ag.waiting) {
    Waiter& w = waiters_.at(delivery);
    if (w.applied || !ag.link->Applied(w.seq)) continue;
    w.applied = true;
    hooks_.push(NowNs(), delivery, EventType::kReport);
  }
  SchedulePoll(agent);
}

void LeaseNetwork::Tick() {
  ticking_ = true;
  std::optional<lease::Down> down = replica_->Tick();
  ticking_ = false;
  if (down.has_value()) {
    auto shared = std::make_shared<const lease::Down>(*std::move(down));
    for (int a = 0; a < m_.agents; ++a) SendDown(a, shared);
  }
  ScheduleTick();
}

void LeaseNetwork::Poll(int agent) {
  if (std::optional<lease::Up> up = agents_[agent].link->Poll(Now())) {
    SendUp(agent, *std::move(up));
  }
  SchedulePoll(agent);
}

void LeaseNetwork::ScheduleTick() {
  const int64_t t = std::max(NowNs(), CeilNs(replica_->NextTick()));
  if (t >= tick_at_ns_) return;
  tick_at_ns_ = t;
  hooks_.push(t, 0, EventType::kTick);
}

void LeaseNetwork::SchedulePoll(int agent) {
  Agent& ag = agents_[agent];
  const int64_t t = std::max(NowNs(), CeilNs(ag.link->NextPoll()));
  if (t >= ag.poll_at_ns || t == INT64_MAX) return;
  ag.poll_at_ns = t;
  hooks_.push(t, agent, EventType::kPoll);
}

}  // namespace stagger::sim
