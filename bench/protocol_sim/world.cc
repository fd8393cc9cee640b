#include "bench/protocol_sim/world.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/internal/held_book.h"
#include "core/lease/replica_clock.h"
#include "core/lease/time_bounds.h"
#include "core/wire/wire.h"
#include "server/service/agent_held_calls.h"
#include "server/service/wait_room.h"

namespace stagger::protocol_sim {
namespace {

constexpr absl::Duration kCallTimeout = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// A timer fires this much after its clock's due time: a clock that
// rounds down never sees it early.
constexpr absl::Duration kTimerSlack = absl::Microseconds(1);
// I4's slack over a held call's give-up time: the timers' rounding.
constexpr absl::Duration kHeldSlack = absl::Milliseconds(1);
constexpr int kLeaseSource = 0, kCentralSource = 1, kFallbackSource = 2;
constexpr int kDelivered = 0, kGaveUp = 1, kCancelled = 2, kLost = 3;
const absl::Time kWallOrigin = absl::FromUnixSeconds(1767225600);  // 2026

// A draw in [lo, hi) keyed by what it is for.
absl::Duration Keyed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c,
                     absl::Duration lo, absl::Duration hi) {
  const int64_t span = absl::ToInt64Nanoseconds(hi - lo);
  if (span <= 0) return lo;
  return lo + absl::Nanoseconds(
                  static_cast<int64_t>(Mix(seed, a, b, c) % uint64_t(span)));
}

}  // namespace

// A node's clock: origin + step + true time at its own rate.
struct World::Clock final : engine::Clock {
  Clock(const World* w, absl::Time origin, double rate)
      : w(w), origin(origin), rate(rate) {}
  absl::Time Now() const override {
    return origin + step +
           absl::Nanoseconds(static_cast<int64_t>(
               static_cast<double>(w->now_ns_) * rate));
  }
  const World* w;
  absl::Time origin;
  double rate;
  absl::Duration step = absl::ZeroDuration();
};

struct World::Replica {
  Replica(const World* w, int r, double drift)
      : mono(w, absl::UnixEpoch() + absl::Hours(1000 + r), 1 + drift),
        wall(w, kWallOrigin + absl::Milliseconds(37 * r), 1 + drift) {}
  bool alive = false;
  uint64_t incarnation = 0;
  uint64_t starts = 0;
  Clock mono, wall;
  // What the engine reads, as in staggerd (lease/replica_clock.h): the wall
  // clock read at each start, then advanced by the monotonic one.
  std::unique_ptr<engine::Clock> engine_clock;
  std::unique_ptr<engine::SeededRandom> random;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<lease::ReplicaSync> sync;
  // Held calls: waiting Admits agents hold here (driven by the world).
  std::unique_ptr<service::WaitRoom> room;
  uint64_t room_gen = 0;
  absl::Duration room_at = absl::InfiniteDuration();
  // I5: per key, probes handed out (a count) and the last one's token.
  std::map<int, std::pair<uint64_t, uint64_t>> probe_given;
  std::vector<engine::EndpointRecord> saved;
  std::vector<engine::Pause> saved_pauses;
  uint64_t tick_gen = 0;
  absl::Duration tick_at = absl::InfiniteDuration();
  // I3: the true time of the last failed attempt reported here, per key.
  std::vector<absl::Duration> last_failure;
  // Counts applied by the Receive in progress: key -> consecutive
  // failures before, and the agent and seq they came in.
  struct Pending {
    int key;
    int before;
    int agent;
    uint64_t seq;
  };
  std::vector<Pending> applying;
};

struct World::Agent {
  Agent(const World* w, int a, double drift)
      : mono(w, absl::UnixEpoch() + absl::Hours(2000 + a), 1 + drift),
        wall(w, kWallOrigin - absl::Milliseconds(53 * a), 1 + drift) {}
  bool alive = false;
  uint64_t incarnation = 0;
  Clock mono, wall;
  std::vector<std::unique_ptr<lease::AgentLink>> links;
  std::unique_ptr<engine::SeededRandom> fallback_random;
  std::unique_ptr<engine::Engine> fallback;
  std::mt19937_64 gen;
  int free_workers = 0;
  std::deque<int> waiting;
  // I3: successes answered here, true time, not yet in a report, per
  // (replica, key); and per (replica, seq, key) the latest in a report.
  std::map<std::pair<int, int>, absl::Duration> pending_success;
  std::map<std::tuple<int, uint64_t, int>, absl::Duration> report_success;
};

struct World::Link {
  int a = 0, r = 0;
  uint64_t gen = 0;        // the stream now (0: none)
  bool connected = false;  // the agent's view
  uint64_t stream = 0;     // the replica's id for it, once opened
  absl::Duration last_up, last_down;  // FIFO
  struct Window {
    absl::Duration from, to, extra;
  };
  std::vector<Window> partitions, slow;
  absl::Duration dup_extra = absl::InfiniteDuration();
  uint64_t poll_gen = 0;
  absl::Duration poll_at = absl::InfiniteDuration();
  absl::Duration backoff = absl::Milliseconds(100);
  bool reconnecting = false;
  uint64_t messages = 0;
  std::map<uint64_t, uint64_t> sent_max;  // per replica incarnation
  struct Waiter {
    int delivery;
    uint64_t seq;
    uint64_t op;
  };
  std::vector<Waiter> flush_waiters;
  // Held calls, agent side: the book (SyncSession's), its give-up timer.
  client::HeldBook book;
  uint64_t give_up_gen = 0;
  absl::Duration give_up_at = absl::InfiniteDuration();
  // Replica side: this stream's held calls, and answers not yet written
  // (a stalled stream's write queue).
  std::shared_ptr<service::AgentHeldCalls> held;
  struct Unwritten {
    v1::HeldAnswer answer;
    int key;
  };
  std::vector<Unwritten> unwritten;
  absl::Duration left_until;  // the agent's members lack r until then
};

struct World::Delivery {
  Item item;
  int agent = 0;
  int key = 0;
  uint64_t agent_incarnation = 0;
  int attempt = 1;
  absl::Time deadline;
  absl::Time first_attempt_time = absl::InfinitePast();
  uint64_t admission = 0;
  int source = kCentralSource;
  uint64_t op = 0;  // each step's token: a stale continuation does nothing
  uint64_t probe = 0;
  bool ended = false;
  bool has_worker = false;
  absl::Duration failed_at;  // true time of its last failed answer
  const char* state = "waiting for a worker";
  absl::Duration wait;  // > 0: its Admits wait (held calls)
  uint64_t held_call = 0;  // the held call out now (0: none), on link
  int held_r = -1;         // (agent, held_r) with the book's id held_id
  uint64_t held_id = 0;
};

World::World(const Plan& plan,
             std::function<void(const std::string&)> trace)
    : plan_(plan), trace_(std::move(trace)) {
  for (int k = 0; k < plan_.keys; ++k) {
    keys_.push_back(KeyName(k));
  }
  for (int r = 0; r < plan_.replicas; ++r) {
    members_.push_back(MemberName(r));
  }
  rendezvous_ = std::make_unique<wire::Rendezvous>(
      *wire::Rendezvous::Create(members_));
  outage_from_.assign(plan_.keys, absl::InfiniteDuration());
  outage_until_.assign(plan_.keys, absl::ZeroDuration());
  for (int r = 0; r < plan_.replicas; ++r) {
    replicas_.push_back(
        std::make_unique<Replica>(this, r, plan_.drift[plan_.agents + r]));
  }
  for (int a = 0; a < plan_.agents; ++a) {
    agents_.push_back(std::make_unique<Agent>(this, a, plan_.drift[a]));
    for (int r = 0; r < plan_.replicas; ++r) {
      auto l = std::make_unique<Link>();
      l->a = a;
      l->r = r;
      links_.push_back(std::move(l));
    }
  }
}

// A run that stopped early may leave calls held: their streams close
// before the rooms go, so that nothing answers into a world half gone.
World::~World() {
  for (auto& l : links_) {
    if (l->held != nullptr) l->held->Close();
    l->held.reset();
  }
  for (auto& rep : replicas_) rep->room.reset();
}

void World::Trace(int id, const std::string& what) {
  if (!trace_) return;
  const Delivery& d = *deliveries_[id];
  trace_(absl::StrFormat("%8.3fs d%d (agent %d, key %d, attempt %d): %s",
                         absl::ToDoubleSeconds(Now()), id, d.agent, d.key,
                         d.attempt, what));
}

World::Link& World::link(int a, int r) {
  return *links_[static_cast<size_t>(a * plan_.replicas + r)];
}

void World::At(absl::Duration at, std::function<void()> fn) {
  events_.push(Event{absl::ToInt64Nanoseconds(std::max(at, Now())),
                     event_seq_++, std::move(fn)});
}

absl::Duration World::TrueSpan(const Clock& clock, absl::Duration d) const {
  return d / clock.rate;
}

engine::EngineConfig World::Config(int version) const {
  engine::EngineConfig c;
  engine::PolicyParams& p = c.default_policy;
  p.backoff.base = absl::Milliseconds(100);
  p.backoff.cap = absl::Seconds(1);
  p.backoff.max_attempts = 8;
  p.backoff.initial_jitter = absl::Milliseconds(50 + 100 * (version % 3));
  p.breaker.consecutive_failures = 2 + version % 3;
  p.breaker.min_throughput = 10;
  p.breaker.window = absl::Seconds(5);
  p.breaker.open_base = absl::Milliseconds(300);
  p.breaker.open_max = absl::Seconds(2);
  p.breaker.half_open_probes = 1;
  p.breaker.close_after_successes = 1;
  p.breaker.probe_timeout = absl::Seconds(3);
  p.deferral.spread = absl::Milliseconds(200);
  return c;
}

void World::StartReplica(int r) {
  Replica& rep = *replicas_[r];
  rep.alive = true;
  rep.incarnation = static_cast<uint64_t>(r + 1) * 1000 + ++rep.starts;
  rep.random = std::make_unique<engine::SeededRandom>(
      Mix(plan_.seed, 0x7265706c, r, rep.incarnation));
  rep.engine_clock = lease::ReplicaEngineClock(&rep.wall, &rep.mono);
  rep.engine = std::make_unique<engine::Engine>(
      Config(config_version_), rep.engine_clock.get(), rep.random.get());
  lease::ReplicaSync::Options o;
  o.ttl = plan_.ttl;
  o.incarnation = rep.incarnation;
  if (plan_.replicas > 1) {
    o.members = members_;
    o.self = members_[r];
    o.owner_of = [this](absl::string_view key) {
      return rendezvous_->Owner(key);
    };
  }
  rep.sync = std::make_unique<lease::ReplicaSync>(o, rep.engine.get(),
                                                  &rep.mono);
  service::WaitRoom::Options room;
  room.max_waiting = 1000;
  room.max_agent_held = 1000;
  room.driver = service::WaitRoom::Driver::kCaller;
  rep.room = std::make_unique<service::WaitRoom>(
      rep.engine.get(), rep.engine_clock.get(), room, nullptr);
  rep.room_at = absl::InfiniteDuration();
  rep.probe_given.clear();
  rep.sync->AttachToEngine();
  rep.sync->set_counts_observer(
      [this, r](const lease::AgentKey& agent, const lease::CountReport& c) {
        OnCountsApplied(r, agent, c);
      });
  rep.last_failure.assign(plan_.keys, -absl::InfiniteDuration());
  rep.engine->ImportState(rep.saved);
  for (const engine::Pause& p : rep.saved_pauses) {
    (void)rep.engine->pauses().Restore(p, rep.engine_clock->Now());
  }
  ScheduleTick(r);
}

void World::StartAgent(int a) {
  Agent& ag = *agents_[a];
  ag.alive = true;
  ++ag.incarnation;
  ag.gen.seed(Mix(plan_.seed, 0x6167, a, ag.incarnation));
  ag.links.clear();
  for (int r = 0; r < plan_.replicas; ++r) {
    lease::AgentLink::Options o;
    o.agent_id = absl::StrCat("a", a);
    o.incarnation = ag.incarnation;
    o.members = plan_.replicas > 1 ? members_
                                   : std::vector<std::string>{members_[0]};
    o.flush_interval = plan_.flush;
    ag.links.push_back(std::make_unique<lease::AgentLink>(o));
  }
  ag.fallback_random = std::make_unique<engine::SeededRandom>(
      Mix(plan_.seed, 0x66616c6c, a, ag.incarnation));
  ag.fallback = std::make_unique<engine::Engine>(
      Config(config_version_), &ag.wall, ag.fallback_random.get());
  ag.pending_success.clear();
  ag.report_success.clear();
  ag.free_workers = plan_.workers_per_agent;
  ag.waiting.clear();
  for (int r = 0; r < plan_.replicas; ++r) {
    Link& l = link(a, r);
    l.gen = 0;
    l.connected = false;
    l.flush_waiters.clear();
    l.book = client::HeldBook{};
    l.give_up_at = absl::InfiniteDuration();  // the last one's timer is gone
    ++l.give_up_gen;
    l.backoff = absl::Milliseconds(100);
    Connect(a, r);
  }
}

std::string World::AgentName(int a) const {
  return absl::StrCat("a", a, "/", agents_[a]->incarnation);
}

// ---------------------------------------------------------------- network

bool World::Partitioned(const Link& l, absl::Duration at) const {
  for (const Link::Window& w : l.partitions) {
    if (at >= w.from && at < w.to) return true;
  }
  return false;
}

absl::Duration World::Latency(Link& l, bool up) {
  absl::Duration d =
      Keyed(plan_.seed, 0x6c6174, l.a * 16 + l.r, l.messages++ * 2 + up,
            plan_.latency / 2, plan_.latency * 3 / 2 + absl::Microseconds(1));
  for (const Link::Window& w : l.slow) {
    if (Now() >= w.from && Now() < w.to) d += w.extra;
  }
  return d;
}

std::optional<absl::Duration> World::Arrival(Link& l, bool up) {
  absl::Duration t = Now() + Latency(l, up);
  for (const Link::Window& w : l.partitions) {
    if (Now() >= w.from && Now() < w.to) t = std::max(t, w.to + plan_.latency);
  }
  absl::Duration& last = up ? l.last_up : l.last_down;
  t = std::max(t, last);
  last = t;
  return t;
}

void World::Connect(int a, int r) {
  Link& l = link(a, r);
  Agent& ag = *agents_[a];
  if (!ag.alive || l.connected) return;
  if (!replicas_[r]->alive || Partitioned(l, Now()) || Now() < l.left_until) {
    Reconnect(a, r);
    return;
  }
  l.gen = ++event_seq_;
  l.connected = true;
  l.stream = 0;
  l.last_up = l.last_down = Now();
  l.backoff = absl::Milliseconds(100);
  for (lease::Up& up : ag.links[r]->OnOpen(ag.mono.Now())) {
    SendUp(a, r, std::move(up));
  }
  SchedulePoll(a, r);
}

void World::Reconnect(int a, int r) {
  Link& l = link(a, r);
  if (l.reconnecting) return;
  l.reconnecting = true;
  const absl::Duration pause =
      l.backoff / 2 + Keyed(plan_.seed, 0x7265636f, a * 16 + r,
                            l.messages++, absl::ZeroDuration(), l.backoff / 2);
  l.backoff = std::min(l.backoff * 2, kMaxBackoff);
  const uint64_t incarnation = agents_[a]->incarnation;
  After(pause, [this, a, r, incarnation] {
    link(a, r).reconnecting = false;
    if (agents_[a]->incarnation == incarnation) Connect(a, r);
  });
}

void World::Break(int a, int r, bool left) {
  Link& l = link(a, r);
  if (!l.connected) return;
  l.connected = false;
  l.gen = 0;
  Agent& ag = *agents_[a];
  if (ag.alive) ag.links[r]->OnBroken();
  Replica& rep = *replicas_[r];
  if (rep.alive && l.stream != 0) rep.sync->Close(l.stream);
  l.stream = 0;
  if (l.held != nullptr) {  // as sync_service.cc's OnDone
    GiveBackUnwritten(a, r);
    l.held->Close();
    l.held.reset();
    ScheduleRoom(r);
  }
  l.unwritten.clear();
  if (ag.alive) {  // as SyncSession: the book's calls end with the stream
    if (left) {
      l.book.EndAllLeft();
    } else {
      l.book.EndAll(
          absl::UnavailableError("the stream to the coordinator broke"));
    }
    FinishHeld(a, r);
  }
  // Failure reports waiting for their counts go on without them.
  std::vector<Link::Waiter> waiters;
  waiters.swap(l.flush_waiters);
  for (const Link::Waiter& w : waiters) {
    Delivery& d = *deliveries_[w.delivery];
    if (d.op == w.op && !d.ended) CallCentral(w.delivery, true, false);
  }
  if (ag.alive) Reconnect(a, r);
}

void World::NoteSent(int a, int r, const lease::Up& up) {
  ++stats_.messages_up;
  if (!up.counts.has_value()) return;
  Agent& ag = *agents_[a];
  checks_.ReportSent(AgentName(a), r, up.counts->seq, up.counts->lost);
  for (const lease::EndpointCounts& e : up.counts->endpoints) {
    const auto k = std::find(keys_.begin(), keys_.end(), e.endpoint);
    if (k == keys_.end()) continue;
    const int key = static_cast<int>(k - keys_.begin());
    auto p = ag.pending_success.find({r, key});
    if (p == ag.pending_success.end()) continue;
    ag.report_success.try_emplace({r, up.counts->seq, key}, p->second);
    ag.pending_success.erase(p);
  }
}

void World::SendUp(int a, int r, lease::Up up) {
  Link& l = link(a, r);
  if (!l.connected) return;
  NoteSent(a, r, up);
  const std::optional<absl::Duration> at = Arrival(l, /*up=*/true);
  const uint64_t gen = l.gen;
  At(*at, [this, a, r, gen, up = std::move(up)] { ArriveUp(a, r, gen, up); });
}

void World::SendDown(int a, int r, const lease::Down& down) {
  Link& l = link(a, r);
  if (!l.connected) return;
  if (down.snapshot.has_value()) {
    uint64_t& m = l.sent_max[down.snapshot->incarnation];
    m = std::max(m, down.snapshot->version);
  }
  if (down.delta.has_value()) {
    uint64_t& m = l.sent_max[down.delta->incarnation];
    m = std::max(m, down.delta->to_version);
  }
  const std::optional<absl::Duration> at = Arrival(l, /*up=*/false);
  const uint64_t gen = l.gen;
  At(*at, [this, a, r, gen, down] { ArriveDown(a, r, gen, down); });
  if (l.dup_extra != absl::InfiniteDuration()) {
    At(*at + l.dup_extra, [this, a, r, gen, down] { ArriveDown(a, r, gen, down); });
    l.dup_extra = absl::InfiniteDuration();
  }
}

void World::ArriveUp(int a, int r, uint64_t gen, const lease::Up& up) {
  Link& l = link(a, r);
  Replica& rep = *replicas_[r];
  if (gen != l.gen || !rep.alive) return;
  checks_.Acked(a, r, up.acked_incarnation, up.acked_version,
                up.acked_incarnation == 0 ? 0 : l.sent_max[up.acked_incarnation],
                Now());
  rep.applying.clear();
  absl::StatusOr<lease::Down> down;
  if (up.hello.has_value()) {
    absl::StatusOr<lease::ReplicaSync::Opened> o = rep.sync->Open(up);
    if (o.ok()) {
      l.stream = o->stream;
      down = std::move(o->first);
      const uint64_t gen_now = l.gen;
      l.held = service::AgentHeldCalls::Make(
          rep.engine.get(), rep.room.get(), rep.engine_clock.get(), nullptr,
          [this, a, r, gen_now](v1::HeldAnswer answer,
                                absl::string_view endpoint) {
            ReplicaAnswer(a, r, gen_now, std::move(answer), endpoint);
          },
          absl::StrCat("a", a));
    } else {
      down = o.status();
    }
  } else {
    down = rep.sync->Receive(l.stream, up);
  }
  for (const Replica::Pending& p : rep.applying) {
    absl::StatusOr<engine::EndpointSnapshot> after =
        rep.engine->Inspect(keys_[p.key]);
    if (!after.ok() || p.before == 0 || after->consecutive_failures != 0) {
      continue;
    }
    Agent& ag = *agents_[p.agent];
    auto s = ag.report_success.find({r, p.seq, p.key});
    if (s != ag.report_success.end() && rep.last_failure[p.key] > s->second) {
      checks_.RunUndone(p.key, s->second, rep.last_failure[p.key], Now());
    }
  }
  if (!rep.applying.empty()) WakeRoom(r);  // counts: evidence for waiters
  ScheduleTick(r);
  if (!down.ok()) {
    if (absl::StrContains(down.status().message(), "counts.seq")) {
      checks_.CountGap(std::string(down.status().message()), Now());
    }
    Break(a, r);
    return;
  }
  if (down->renewed != 0 || down->applied_seq != 0 ||
      down->snapshot.has_value() || !down->refusal.empty()) {
    SendDown(a, r, *down);
  }
}

void World::ArriveDown(int a, int r, uint64_t gen, const lease::Down& down) {
  Link& l = link(a, r);
  Agent& ag = *agents_[a];
  if (gen != l.gen || !ag.alive) return;
  lease::AgentLink& link_ = *ag.links[r];
  link_.OnDown(down, ag.mono.Now());
  const lease::AgentLink::Status st = link_.status(ag.mono.Now());
  if (st.in_sync) checks_.CopyAt(a, r, st.incarnation, st.version, Now());
  std::vector<Link::Waiter> ready;
  for (auto it = l.flush_waiters.begin(); it != l.flush_waiters.end();) {
    if (link_.Applied(it->seq)) {
      ready.push_back(*it);
      it = l.flush_waiters.erase(it);
    } else {
      ++it;
    }
  }
  for (const Link::Waiter& w : ready) {
    Delivery& d = *deliveries_[w.delivery];
    if (d.op == w.op && !d.ended) CallCentral(w.delivery, true, false);
  }
  SchedulePoll(a, r);
}

void World::ScheduleTick(int r) {
  Replica& rep = *replicas_[r];
  if (!rep.alive) return;
  const absl::Duration wait =
      std::max(absl::ZeroDuration(), rep.sync->NextTick() - rep.mono.Now());
  const absl::Duration at = Now() + TrueSpan(rep.mono, wait);
  if (at >= rep.tick_at && rep.tick_at >= Now()) return;
  rep.tick_at = at;
  const uint64_t tick = ++rep.tick_gen;
  const uint64_t incarnation = rep.incarnation;
  At(at, [this, r, tick, incarnation] {
    Replica& rep = *replicas_[r];
    if (!rep.alive || rep.incarnation != incarnation || rep.tick_gen != tick) {
      return;
    }
    rep.tick_at = absl::InfiniteDuration();
    if (std::optional<lease::Down> down = rep.sync->Tick()) {
      for (int a = 0; a < plan_.agents; ++a) {
        Link& l = link(a, r);
        if (l.connected && l.stream != 0) SendDown(a, r, *down);
      }
    }
    ScheduleTick(r);
  });
}

void World::SchedulePoll(int a, int r) {
  Agent& ag = *agents_[a];
  Link& l = link(a, r);
  if (!ag.alive || !l.connected) return;
  const absl::Duration wait = std::max(
      absl::ZeroDuration(), ag.links[r]->NextPoll() - ag.mono.Now());
  const absl::Duration at = Now() + TrueSpan(ag.mono, wait);
  if (at >= l.poll_at && l.poll_at > Now()) return;
  l.poll_at = at;
  const uint64_t poll = ++l.poll_gen;
  const uint64_t gen = l.gen;
  At(at, [this, a, r, poll, gen] {
    Link& l = link(a, r);
    if (l.poll_gen != poll || l.gen != gen || !l.connected) return;
    l.poll_at = absl::InfiniteDuration();
    Agent& ag = *agents_[a];
    if (std::optional<lease::Up> up = ag.links[r]->Poll(ag.mono.Now())) {
      SendUp(a, r, std::move(*up));
    }
    SchedulePoll(a, r);
  });
}

// ---------------------------------------------------------------- workers

engine::AdmitInput World::AdmitIn(const Delivery& d) const {
  engine::AdmitInput in;
  in.endpoint = keys_[d.key];
  in.attempt = d.attempt;
  in.deadline = d.deadline;
  in.first_attempt_time = d.first_attempt_time;
  return in;
}

engine::ReportInput World::ReportIn(const Delivery& d, bool ok) const {
  engine::ReportInput in;
  in.endpoint = keys_[d.key];
  in.attempt = d.attempt;
  in.outcome = ok ? engine::Outcome::kSuccess
                  : engine::Outcome::kRetryableFailure;
  in.deadline = d.deadline;
  in.first_attempt_time = d.first_attempt_time;
  in.admission = d.admission;
  return in;
}

lease::AgentLink* World::LocalLink(int a, int key) {
  Agent& ag = *agents_[a];
  std::vector<const lease::LinkView*> links;
  for (auto& l : ag.links) links.push_back(l.get());
  const size_t owner = rendezvous_->Owner(keys_[key]);
  if (!lease::MayAnswerLocally(links, members_, owner, keys_[key],
                               ag.mono.Now())) {
    return nullptr;
  }
  return ag.links[owner].get();
}

int World::RouteFor(int a, int key) const {
  for (size_t r : rendezvous_->Rank(keys_[key])) {
    if (links_[static_cast<size_t>(a * plan_.replicas) + r]->connected) {
      return static_cast<int>(r);
    }
  }
  return -1;
}

void World::Begin(const Item& item) {
  Agent& ag = *agents_[item.agent];
  if (!ag.alive) {
    ++stats_.lost_with_agent;
    return;
  }
  const int id = static_cast<int>(deliveries_.size());
  auto d = std::make_unique<Delivery>();
  d->item = item;
  d->agent = item.agent;
  d->key = item.key;
  d->agent_incarnation = ag.incarnation;
  d->deadline = ag.wall.Now() + item.deadline;
  d->wait = WaitFor(item);
  deliveries_.push_back(std::move(d));
  if (item.cancel_after != absl::InfiniteDuration()) {
    After(item.cancel_after, [this, id] {
      Delivery& d = *deliveries_[id];
      if (!d.ended) End(id, kCancelled);
    });
  }
  if (ag.free_workers > 0) {
    --ag.free_workers;
    deliveries_[id]->has_worker = true;
    Admit(id);
  } else {
    ag.waiting.push_back(id);
  }
}

void World::Admit(int id) {
  Delivery& d = *deliveries_[id];
  Agent& ag = *agents_[d.agent];
  d.state = "asking Admit";
  ++d.op;
  if (lease::AgentLink* l = LocalLink(d.agent, d.key)) {
    if (std::optional<engine::Decision> dec =
            l->Admit(AdmitIn(d), ag.mono.Now(), ag.gen)) {
      ++stats_.local_admits;
      Follow(id, *dec, absl::ZeroDuration(), kLeaseSource);
      return;
    }
  }
  if (d.wait > absl::ZeroDuration()) {
    const int r = RouteFor(d.agent, d.key);
    if (r >= 0 && HoldOnStream(id, r)) return;
  }
  CallCentral(id, /*report=*/false, false);
}

void World::CallCentral(int id, bool report, bool ok) {
  Delivery& d = *deliveries_[id];
  const int r = RouteFor(d.agent, d.key);
  if (r < 0) return DecideFallback(id, report, ok);
  ++stats_.central_calls;
  const uint64_t op = ++d.op;
  d.state = report ? "waiting for a Report's answer" : "waiting for an Admit's answer";
  Link& l = link(d.agent, r);
  const absl::Duration timeout = kCallTimeout + 2 * plan_.latency;
  After(timeout, [this, id, op, report, ok] {
    Delivery& d = *deliveries_[id];
    if (d.op != op || d.ended) return;
    ++d.op;
    DecideFallback(id, report, ok);
  });
  if (Partitioned(l, Now())) return;  // the call never gets there
  const absl::Duration there = Now() + Latency(l, true);
  const uint64_t rinc = replicas_[r]->incarnation;
  At(there, [this, id, op, r, rinc, report, ok] {
    Replica& rep = *replicas_[r];
    Delivery& d = *deliveries_[id];
    if (!rep.alive || rep.incarnation != rinc) return;
    Link& l = link(d.agent, r);
    if (Partitioned(l, Now())) return;
    const size_t owner = rendezvous_->Owner(keys_[d.key]);
    if (static_cast<int>(owner) != r && plan_.replicas > 1) {
      rep.sync->OnStandIn(members_[owner]);
    }
    absl::StatusOr<engine::Decision> dec =
        report ? rep.engine->Report(ReportIn(d, ok))
               : rep.engine->Admit(AdmitIn(d));
    if (report && !ok && dec.ok()) rep.last_failure[d.key] = d.failed_at;
    if (!report && dec.ok() &&
        (dec->admission & engine::kProbeAdmissionBit) != 0) {
      NoteProbe(r, d.key, dec->admission);
    }
    if (report) WakeRoom(r);
    ScheduleTick(r);
    if (!dec.ok()) return;  // a bug would show as a stuck delivery
    const absl::Duration defer_for =
        dec->verdict == engine::Verdict::kDefer
            ? std::max(absl::ZeroDuration(), dec->defer_until - rep.engine_clock->Now())
            : absl::ZeroDuration();
    const absl::Duration back = Now() + Latency(l, false);
    const engine::Decision answer = *dec;
    At(back, [this, id, op, answer, defer_for] {
      Delivery& d = *deliveries_[id];
      if (d.op != op || d.ended) return;
      Follow(id, answer, defer_for, kCentralSource);
    });
  });
}

void World::DecideFallback(int id, bool report, bool ok) {
  Delivery& d = *deliveries_[id];
  Agent& ag = *agents_[d.agent];
  ++stats_.fallback;
  absl::StatusOr<engine::Decision> dec =
      report ? ag.fallback->Report(ReportIn(d, ok))
             : ag.fallback->Admit(AdmitIn(d));
  if (!dec.ok()) return;
  const absl::Duration defer_for =
      dec->verdict == engine::Verdict::kDefer
          ? std::max(absl::ZeroDuration(), dec->defer_until - ag.wall.Now())
          : absl::ZeroDuration();
  Follow(id, *dec, defer_for, kFallbackSource);
}

void World::Follow(int id, const engine::Decision& dec,
                   absl::Duration defer_for, int source) {
  Delivery& d = *deliveries_[id];
  if (trace_) {
    static const char* kSources[] = {"lease", "coordinator", "fallback"};
    Trace(id, absl::StrCat(kSources[source], " says ",
                           engine::VerdictName(dec.verdict), " ",
                           engine::ReasonName(dec.reason), " delay ",
                           absl::FormatDuration(dec.delay), " defer ",
                           absl::FormatDuration(defer_for)));
  }
  const uint64_t op = ++d.op;
  switch (dec.verdict) {
    case engine::Verdict::kProceed:
      d.attempt = dec.attempt;
      d.admission = dec.admission;
      d.source = source;
      d.state = "waiting to send";
      After(TrueSpan(agents_[d.agent]->mono, dec.delay), [this, id, op] {
        if (deliveries_[id]->op == op && !deliveries_[id]->ended) Send(id);
      });
      return;
    case engine::Verdict::kDefer:
      d.attempt = dec.attempt;
      d.state = "deferred";
      After(TrueSpan(agents_[d.agent]->mono, defer_for), [this, id, op] {
        if (deliveries_[id]->op == op && !deliveries_[id]->ended) Admit(id);
      });
      return;
    case engine::Verdict::kGiveUp: return End(id, kGaveUp);
    case engine::Verdict::kDone: return End(id, kDelivered);
  }
}

void World::Send(int id) {
  Delivery& d = *deliveries_[id];
  Agent& ag = *agents_[d.agent];
  if (d.first_attempt_time == absl::InfinitePast()) {
    d.first_attempt_time = ag.wall.Now();
  }
  uint64_t probe = 0;
  if (d.source == kLeaseSource) {
    checks_.LocalSent(d.key, d.agent, Now());
  } else if (d.source == kFallbackSource) {
    checks_.FallbackSent();
  } else if ((d.admission & engine::kProbeAdmissionBit) != 0) {
    probe = Mix(plan_.seed, 0x70726f62, id, d.op);
    ++stats_.probes;
    checks_.ProbeSent(d.key, probe, Now());
  }
  const absl::Duration t = Now();
  const bool ok = !(t >= outage_from_[d.key] && t < outage_until_[d.key]);
  const absl::Duration answer =
      ok ? Keyed(plan_.seed, 0x6f6b, id, d.op, absl::Milliseconds(10),
                 absl::Milliseconds(100))
         : Keyed(plan_.seed, 0x6661696c, id, d.op, absl::Milliseconds(100),
                 absl::Milliseconds(800));
  const uint64_t op = ++d.op;
  d.state = "sending";
  Trace(id, ok ? "sends: the endpoint will answer 200" : "sends: 503");
  After(answer, [this, id, op, ok, probe] {
    if (probe != 0) checks_.ProbeAnswered(probe);  // on the wire whatever
    Delivery& d = *deliveries_[id];
    if (d.op != op || d.ended) return;
    if (!ok) d.failed_at = Now();
    ReportOutcome(id, ok);
  });
}

void World::ReportOutcome(int id, bool ok) {
  Delivery& d = *deliveries_[id];
  Agent& ag = *agents_[d.agent];
  ++d.op;
  const size_t owner = rendezvous_->Owner(keys_[d.key]);
  if (ok) {
    if (lease::AgentLink* l = LocalLink(d.agent, d.key)) {
      if (std::optional<engine::Decision> dec =
              l->Report(ReportIn(d, ok), ag.mono.Now())) {
        ++stats_.local_reports;
        absl::Duration& last =
            ag.pending_success[{static_cast<int>(owner), d.key}];
        last = std::max(last, Now());
        return Follow(id, *dec, absl::ZeroDuration(), kLeaseSource);
      }
    }
    return CallCentral(id, /*report=*/true, ok);
  }
  // A failure: the owner learns this key's local successes first.
  Link& l = link(d.agent, static_cast<int>(owner));
  if (l.connected) {
    if (std::optional<lease::Up> up =
            ag.links[owner]->FlushFor(keys_[d.key], ag.mono.Now())) {
      const uint64_t seq = up->counts->seq;
      SendUp(d.agent, static_cast<int>(owner), std::move(*up));
      const uint64_t op = ++d.op;
      d.state = "waiting for its counts to be applied";
      l.flush_waiters.push_back({id, seq, op});
      After(kCallTimeout, [this, id, op] {
        Delivery& d = *deliveries_[id];
        if (d.op == op && !d.ended) CallCentral(id, true, false);
      });
      return;
    }
  }
  CallCentral(id, /*report=*/true, ok);
}

void World::End(int id, int how) {
  Delivery& d = *deliveries_[id];
  d.ended = true;
  ++d.op;
  d.state = "ended";
  switch (how) {
    case kDelivered: ++stats_.delivered; break;
    case kGaveUp: ++stats_.gave_up; break;
    case kCancelled: ++stats_.cancelled; break;
    case kLost: ++stats_.lost_with_agent; break;
  }
  if (how == kCancelled && d.held_call != 0) {  // the worker went away
    Link& l = link(d.agent, d.held_r);
    l.book.Drop(d.held_id);
    FinishHeld(d.agent, d.held_r);
  }
  Agent& ag = *agents_[d.agent];
  if (!d.has_worker || !ag.alive || ag.incarnation != d.agent_incarnation) {
    return;
  }
  d.has_worker = false;
  while (!ag.waiting.empty()) {
    const int next = ag.waiting.front();
    ag.waiting.pop_front();
    if (deliveries_[next]->ended) continue;
    deliveries_[next]->has_worker = true;
    return Admit(next);
  }
  ++ag.free_workers;
}

// ---------------------------------------------------------------- held calls

// The item's own wait; in a plan with held calls, one delivery in eight
// waits 0.2..3 s too (keyed by its id, so a shrunk plan keeps it).
absl::Duration World::WaitFor(const Item& item) const {
  if (item.wait > absl::ZeroDuration()) return item.wait;
  if (!plan_.held_calls || Mix(plan_.seed, 0x77616974, item.id) % 8 != 0) {
    return absl::ZeroDuration();
  }
  return Keyed(plan_.seed, 0x77616974, item.id, 1, absl::Milliseconds(200),
               absl::Seconds(3));
}

int World::KeyOf(absl::string_view endpoint) const {
  const auto k = std::find(keys_.begin(), keys_.end(), endpoint);
  return k == keys_.end() ? -1 : static_cast<int>(k - keys_.begin());
}

// As CoordinatorClient::HoldOnStream: the wait stops short of the
// worker's deadline (less the room's margin), which bounds the give-up.
bool World::HoldOnStream(int id, int r) {
  Delivery& d = *deliveries_[id];
  Agent& ag = *agents_[d.agent];
  Link& l = link(d.agent, r);
  if (!l.connected) return false;
  engine::AdmitInput in = AdmitIn(d);
  const absl::Duration left = d.deadline - ag.wall.Now();
  in.wait = std::min(d.wait, left - service::WaitRoom::kDeadlineMargin);
  if (in.wait <= absl::ZeroDuration()) return false;
  v1::AdmitRequest request;
  wire::ToProto(in, &request);
  const absl::Time now = ag.mono.Now();
  const uint64_t call = ++held_seq_;
  const uint64_t op = ++d.op;
  d.state = "held over the stream";
  d.held_call = call;
  d.held_r = r;
  d.held_id = l.book.Hold(
      std::move(request), in.wait, now, now + left,
      [this, id, call, op](absl::StatusOr<v1::AdmitResponse> result) {
        HeldDone(id, call, op, std::move(result));
      });
  const absl::Duration bound =
      std::min(in.wait + client::HeldBook::kHeldGrace, left);
  checks_.HeldBegun(call, Now() + TrueSpan(ag.mono, bound) + kHeldSlack);
  Trace(id, absl::StrCat("held over the stream to replica ", r, " for ",
                         absl::FormatDuration(in.wait)));
  FinishHeld(d.agent, r);
  return true;
}

// As CoordinatorClient::AnswerHeld, by client::NextStep: an answer is
// followed; a give-up goes to the fallback; a stream's end sends the call
// on. A failure ends nothing here (the worker asks its fallback).
void World::HeldDone(int id, uint64_t call, uint64_t op,
                     absl::StatusOr<v1::AdmitResponse> result) {
  Delivery& d = *deliveries_[id];
  const bool cancelled =
      !result.ok() && result.status().code() == absl::StatusCode::kCancelled;
  checks_.HeldAnswered(call, Now(), cancelled, d.ended);
  if (d.held_call == call) d.held_call = 0;
  if (d.ended || d.op != op) return;
  Agent& ag = *agents_[d.agent];
  const client::HeldNext next = client::NextStep(result);
  if (next == client::HeldNext::kFollow) {
    absl::StatusOr<engine::Decision> dec =
        wire::FromProto(result->decision(), ag.wall.Now());
    if (dec.ok()) {
      dec->admission = result->decision().admission();
      const absl::Duration defer_for =
          dec->verdict == engine::Verdict::kDefer
              ? std::max(absl::ZeroDuration(), dec->defer_until - ag.wall.Now())
              : absl::ZeroDuration();
      return Follow(id, *dec, defer_for, kCentralSource);
    }
  } else if (next == client::HeldNext::kResend) {
    Trace(id, "its held call's stream ended: sent on");
    return CallCentral(id, /*report=*/false, false);
  }
  Trace(id, absl::StrCat("its held call ended: ", result.status().ToString()));
  DecideFallback(id, /*report=*/false, false);
}

void World::FinishHeld(int a, int r) {
  Link& l = link(a, r);
  for (client::HeldBook::Finished& f : l.book.TakeFinished()) {
    f.done(std::move(f.result));
  }
  // As SyncSession's writer: holds, drops and returns go up at once.
  while (l.connected) {
    v1::SyncUp up;
    if (!l.book.FillUp(&up)) break;
    ++stats_.messages_up;
    const std::optional<absl::Duration> at = Arrival(l, /*up=*/true);
    const uint64_t gen = l.gen;
    At(*at, [this, a, r, gen, up = std::move(up)] {
      ArriveHeldUp(a, r, gen, up);
    });
  }
  ScheduleGiveUp(a, r);
}

void World::ScheduleGiveUp(int a, int r) {
  Agent& ag = *agents_[a];
  Link& l = link(a, r);
  const absl::Time due = l.book.NextGiveUp();
  if (!ag.alive || due == absl::InfiniteFuture()) return;
  const absl::Duration at =
      Now() + TrueSpan(ag.mono, std::max(absl::ZeroDuration(),
                                         due - ag.mono.Now())) +
      kTimerSlack;
  if (at >= l.give_up_at && l.give_up_at > Now()) return;
  l.give_up_at = at;
  const uint64_t gen = ++l.give_up_gen;
  const uint64_t incarnation = ag.incarnation;
  At(at, [this, a, r, gen, incarnation] {
    Link& l = link(a, r);
    Agent& ag = *agents_[a];
    if (l.give_up_gen != gen || ag.incarnation != incarnation || !ag.alive) {
      return;
    }
    l.give_up_at = absl::InfiniteDuration();
    l.book.GiveUp(ag.mono.Now());
    FinishHeld(a, r);
  });
}

// As SyncStream::ReceiveHeld.
void World::ArriveHeldUp(int a, int r, uint64_t gen, const v1::SyncUp& up) {
  Link& l = link(a, r);
  if (gen != l.gen || !replicas_[r]->alive || l.held == nullptr) return;
  std::shared_ptr<service::AgentHeldCalls> held = l.held;
  for (const v1::HeldAdmit& h : up.holds()) {
    if (!held->Hold(h).ok()) return Break(a, r);  // a bad id ends it
  }
  for (uint64_t id : up.drops()) held->Drop(id);
  for (const v1::ReturnedRelease& ret : up.returns()) {
    held->Return(ret.endpoint(), ret.admission());
  }
  ScheduleRoom(r);
}

// From the replica's AgentHeldCalls: one answer, into the stream's queue.
void World::ReplicaAnswer(int a, int r, uint64_t gen, v1::HeldAnswer answer,
                          absl::string_view endpoint) {
  checks_.ReplicaAnswered(gen, answer.id(), Now());
  const int key = KeyOf(endpoint);
  const v1::Decision& dec = answer.response().decision();
  if (answer.code() == 0 && key >= 0 &&
      (dec.admission() & engine::kProbeAdmissionBit) != 0) {
    NoteProbe(r, key, dec.admission());
  }
  Link& l = link(a, r);
  if (l.gen != gen) return;  // Close() came first: never called then
  l.unwritten.push_back({std::move(answer), key});
  WriteAnswers(a, r);
}

// A partitioned link's writes block: answers wait for the heal.
void World::WriteAnswers(int a, int r) {
  Link& l = link(a, r);
  if (l.unwritten.empty() || !l.connected || Partitioned(l, Now())) return;
  std::vector<v1::HeldAnswer> answers;
  for (Link::Unwritten& u : l.unwritten) answers.push_back(std::move(u.answer));
  l.unwritten.clear();
  const std::optional<absl::Duration> at = Arrival(l, /*up=*/false);
  const uint64_t gen = l.gen;
  At(*at, [this, a, r, gen, answers = std::move(answers)] {
    ArriveAnswers(a, r, gen, answers);
  });
}

void World::ArriveAnswers(int a, int r, uint64_t gen,
                          const std::vector<v1::HeldAnswer>& answers) {
  Link& l = link(a, r);
  if (gen != l.gen || !agents_[a]->alive) return;  // lost with the stream
  for (const v1::HeldAnswer& answer : answers) l.book.Answer(answer);
  FinishHeld(a, r);
}

void World::GiveBackUnwritten(int a, int r) {
  Link& l = link(a, r);
  Replica& rep = *replicas_[r];
  for (const Link::Unwritten& u : l.unwritten) {
    l.held->Unsent(u.answer, u.key >= 0 ? keys_[u.key] : "");
    const v1::Decision& dec = u.answer.response().decision();
    if (u.answer.code() != 0 || dec.verdict() != v1::PROCEED || u.key < 0 ||
        (dec.admission() & engine::kProbeAdmissionBit) == 0) {
      continue;
    }
    // I5: unless a probe went out on the key since, its slot is free by
    // kProbeReturnBound. A probe of a period that ended holds no slot.
    checks_.ProbeUnsent();
    if (trace_) {
      trace_(absl::StrFormat(
          "%8.3fs replica %d: the stream of agent %d ended before it wrote "
          "held call %d's probe of key %d",
          absl::ToDoubleSeconds(Now()), r, a, u.answer.id(), u.key));
    }
    const std::pair<uint64_t, uint64_t> given = rep.probe_given[u.key];
    if (given.second != dec.admission()) continue;
    const uint64_t incarnation = rep.incarnation;
    const int key = u.key;
    const absl::Duration dropped_at = Now();
    After(Checks::kProbeReturnBound,
          [this, r, key, given, incarnation, dropped_at] {
            Replica& rep = *replicas_[r];
            if (!rep.alive || rep.incarnation != incarnation ||
                rep.probe_given[key] != given) {
              return;
            }
            absl::StatusOr<engine::EndpointSnapshot> s =
                rep.engine->Inspect(keys_[key]);
            if (s.ok() && s->breaker_state == engine::BreakerState::kHalfOpen &&
                s->probes_in_flight > 0) {
              checks_.ProbeKept(r, key, dropped_at, Now());
            }
          });
  }
}

void World::NoteProbe(int r, int key, uint64_t admission) {
  std::pair<uint64_t, uint64_t>& g = replicas_[r]->probe_given[key];
  ++g.first;
  g.second = admission;
  if (trace_) {
    trace_(absl::StrFormat("%8.3fs replica %d: a probe of key %d (%x)",
                           absl::ToDoubleSeconds(Now()), r, key, admission));
  }
}

// Something the waiters' gates read changed (a report, counts, a reload,
// a pause): every line is looked at.
void World::WakeRoom(int r) {
  Replica& rep = *replicas_[r];
  if (!rep.alive || rep.room == nullptr || rep.room->waiting() == 0) return;
  rep.room->WakeIf([](absl::string_view) { return true; });
  ScheduleRoom(r);
}

void World::ScheduleRoom(int r) {
  Replica& rep = *replicas_[r];
  if (!rep.alive || rep.room == nullptr) return;
  const absl::Time due = rep.room->NextDue();
  if (due == absl::InfiniteFuture()) return;
  const absl::Duration at =
      Now() +
      TrueSpan(rep.mono,
               std::max(absl::ZeroDuration(), due - rep.engine_clock->Now())) +
      kTimerSlack;
  if (at >= rep.room_at && rep.room_at >= Now()) return;
  rep.room_at = at;
  const uint64_t gen = ++rep.room_gen;
  const uint64_t incarnation = rep.incarnation;
  At(at, [this, r, gen, incarnation] {
    Replica& rep = *replicas_[r];
    if (!rep.alive || rep.incarnation != incarnation || rep.room_gen != gen) {
      return;
    }
    rep.room_at = absl::InfiniteDuration();
    rep.room->RunDue();
    ScheduleRoom(r);
  });
}

// ---------------------------------------------------------------- crashes

void World::SaveState(int r) {
  Replica& rep = *replicas_[r];
  if (rep.alive) {
    rep.saved.clear();
    rep.engine->ExportState([&](absl::Span<const engine::EndpointRecord> s) {
      rep.saved.insert(rep.saved.end(), s.begin(), s.end());
    });
    rep.saved_pauses = rep.engine->pauses().List(rep.engine_clock->Now());
  }
  After(plan_.save_every, [this, r] { SaveState(r); });
}

void World::CrashReplica(int r, absl::Duration down) {
  Replica& rep = *replicas_[r];
  if (!rep.alive) return;
  for (int a = 0; a < plan_.agents; ++a) Break(a, r);
  rep.alive = false;
  rep.room.reset();
  rep.sync.reset();
  rep.engine.reset();
  After(down, [this, r] { StartReplica(r); });
}

void World::CrashAgent(int a, absl::Duration down) {
  Agent& ag = *agents_[a];
  if (!ag.alive) return;
  for (size_t id = 0; id < deliveries_.size(); ++id) {
    Delivery& d = *deliveries_[id];
    if (d.agent != a || d.ended) continue;
    if (d.held_call != 0) checks_.HeldLost(d.held_call);  // died with it
    d.held_call = 0;
    End(static_cast<int>(id), kLost);
  }
  for (int r = 0; r < plan_.replicas; ++r) link(a, r).book = client::HeldBook{};
  for (int r = 0; r < plan_.replicas; ++r) Break(a, r);
  ag.alive = false;
  After(down, [this, a] { StartAgent(a); });
}

void World::OnCountsApplied(int r, const lease::AgentKey& agent,
                            const lease::CountReport& report) {
  Replica& rep = *replicas_[r];
  const int a = std::stoi(agent.id.substr(1));
  checks_.ReportApplied(absl::StrCat(agent.id, "/", agent.incarnation), r,
                        rep.incarnation, report.seq, report.lost, Now());
  if (agents_[a]->incarnation != agent.incarnation) return;
  for (const lease::EndpointCounts& e : report.endpoints) {
    const auto k = std::find(keys_.begin(), keys_.end(), e.endpoint);
    if (k == keys_.end()) continue;
    absl::StatusOr<engine::EndpointSnapshot> before =
        rep.engine->Inspect(e.endpoint);
    rep.applying.push_back({static_cast<int>(k - keys_.begin()),
                            before.ok() ? before->consecutive_failures : 0, a,
                            report.seq});
  }
}

// ---------------------------------------------------------------- the run

// The faults that act on every replica: a pause, a reload.
void World::ScheduleFleetWide(const Item& item) {
  if (item.kind == ItemKind::kPause) {
    return At(item.at, [this, item] {
      const bool prefix = item.key < 0;
      const std::string target =
          prefix ? std::string("https://k") : keys_[item.key];
      for (auto& rep : replicas_) {
        if (!rep->alive) continue;
        (void)rep->engine->pauses().Set(target, prefix, item.length,
                                        "planned", "sim", rep->engine_clock->Now());
      }
      for (int r = 0; r < plan_.replicas; ++r) WakeRoom(r);
    });
  }
  At(item.at, [this] {
    ++config_version_;
    for (size_t r = 0; r < replicas_.size(); ++r) {
      Replica& rep = *replicas_[r];
      if (!rep.alive) continue;
      rep.engine->SetConfig(Config(config_version_));
      rep.sync->OnConfig(Config(config_version_));
      WakeRoom(static_cast<int>(r));
      ScheduleTick(static_cast<int>(r));
    }
  });
}

void World::Schedule(const Item& item) {
  switch (item.kind) {
    case ItemKind::kDelivery:
      return At(item.at, [this, item] { Begin(item); });
    case ItemKind::kOutage:
      return At(item.at, [this, item] {
        outage_from_[item.key] = Now();
        outage_until_[item.key] =
            std::max(outage_until_[item.key], Now() + item.length);
      });
    case ItemKind::kPartition: {
      Link& l = link(item.agent, item.replica);
      l.partitions.push_back({item.at, item.at + item.length, {}});
      if (item.detect < item.length) {
        At(item.at + item.detect,
           [this, item] { Break(item.agent, item.replica); });
      }
      // Healed: a stalled stream writes what waited.
      At(item.at + item.length,
         [this, item] { WriteAnswers(item.agent, item.replica); });
      return;
    }
    case ItemKind::kSlowLink:
      link(item.agent, item.replica)
          .slow.push_back({item.at, item.at + item.length, item.extra});
      return;
    case ItemKind::kReplicaCrash:
      return At(item.at,
                [this, item] { CrashReplica(item.replica, item.length); });
    case ItemKind::kAgentCrash:
      return At(item.at, [this, item] { CrashAgent(item.agent, item.length); });
    case ItemKind::kClockStep:
      return At(item.at, [this, item] {
        Clock& c = item.agent >= 0 ? agents_[item.agent]->wall
                                   : replicas_[-1 - item.agent]->wall;
        c.step += item.extra;
      });
    case ItemKind::kPause:
    case ItemKind::kReload:
      return ScheduleFleetWide(item);
    case ItemKind::kDuplicate:
      return At(item.at, [this, item] {
        link(item.agent, item.replica).dup_extra = item.extra;
      });
    case ItemKind::kMemberLeaves:
      return At(item.at, [this, item] {
        link(item.agent, item.replica).left_until = Now() + item.length;
        Break(item.agent, item.replica, /*left=*/true);
      });
  }
}

void World::Run() {
  struct Totals {  // the held calls' counts, whatever way the run ends
    World* w;
    ~Totals() {
      w->stats_.held_calls = w->checks_.held_calls();
      w->stats_.held_lost = w->checks_.held_lost();
      w->stats_.probes_unsent = w->checks_.probes_unsent();
    }
  } totals{this};
  for (int r = 0; r < plan_.replicas; ++r) {
    StartReplica(r);
    After(plan_.save_every, [this, r] { SaveState(r); });
  }
  for (int a = 0; a < plan_.agents; ++a) StartAgent(a);
  for (const Item& item : plan_.items) Schedule(item);
  const int64_t end = absl::ToInt64Nanoseconds(plan_.traffic + plan_.quiet);
  while (!events_.empty() && !checks_.violation().has_value()) {
    if (events_.top().t > end) break;
    Event e = events_.top();
    events_.pop();
    now_ns_ = e.t;
    ++stats_.events;
    e.fn();
  }
  if (checks_.violation().has_value()) return;
  std::set<std::string> alive;
  for (int a = 0; a < plan_.agents; ++a) {
    if (agents_[a]->alive) alive.insert(AgentName(a));
  }
  checks_.SettleCounts(alive);
  checks_.SettleHeld(Now());
  for (size_t id = 0; id < deliveries_.size(); ++id) {
    if (!deliveries_[id]->ended) {
      checks_.Stuck(static_cast<int>(id), deliveries_[id]->state, Now());
    }
  }
}

}  // namespace stagger::protocol_sim
