#include "bench/protocol_sim/plan.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/wire/rendezvous.h"

namespace stagger::protocol_sim {

std::string KeyName(int k) {
  return absl::StrCat("https://k", k, ".example/in");
}
std::string MemberName(int r) { return absl::StrCat("stagger-", r); }

namespace {

// Draws of the plan, in order, from one generator seeded by the seed.
class Draw {
 public:
  explicit Draw(uint64_t seed) : gen_(Mix(seed, 0x706c616e)) {}
  int Int(int lo, int hi) {  // [lo, hi]
    return std::uniform_int_distribution<int>(lo, hi)(gen_);
  }
  double Real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }
  absl::Duration Ms(int lo, int hi) { return absl::Milliseconds(Int(lo, hi)); }
  bool Chance(double p) { return Real(0, 1) < p; }

 private:
  std::mt19937_64 gen_;
};

// Deliveries come in bursts on one key from one agent: several workers
// asking about the same endpoint at once is what leases must get right.
void AddDeliveries(Draw& d, Plan& p) {
  const int bursts = d.Int(12, 30);
  for (int b = 0; b < bursts; ++b) {
    const absl::Duration at = d.Ms(0, absl::ToInt64Milliseconds(p.traffic));
    const int key = d.Int(0, p.keys - 1);
    const int agent = d.Int(0, p.agents - 1);
    const int n = d.Int(1, 8);
    for (int i = 0; i < n; ++i) {
      Item it;
      it.kind = ItemKind::kDelivery;
      it.at = at + d.Ms(0, 400) * i;
      it.agent = d.Chance(0.8) ? agent : d.Int(0, p.agents - 1);
      it.key = key;
      it.deadline = d.Ms(2000, 8000);
      it.cancel_after = d.Chance(0.1) ? d.Ms(0, 3000) : absl::InfiniteDuration();
      p.items.push_back(it);
    }
  }
}

// `key` fails from `at` for `length`.
void AddOutage(Plan& p, int key, absl::Duration at, absl::Duration length) {
  Item outage;
  outage.kind = ItemKind::kOutage;
  outage.key = key;
  outage.at = at;
  outage.length = length;
  p.items.push_back(outage);
}

Item Fault(Draw& d, const Plan& p, ItemKind kind) {
  Item it;
  it.kind = kind;
  it.at = d.Ms(0, absl::ToInt64Milliseconds(p.traffic));
  it.agent = d.Int(0, p.agents - 1);
  it.replica = d.Int(0, p.replicas - 1);
  it.key = d.Int(0, p.keys - 1);
  switch (kind) {
    case ItemKind::kOutage: it.length = d.Ms(500, 8000); break;
    case ItemKind::kPartition:
      it.length = d.Ms(200, 6000);
      it.detect = d.Chance(0.5) ? d.Ms(100, 3000) : absl::InfiniteDuration();
      break;
    case ItemKind::kSlowLink:
      it.length = d.Ms(200, 5000);
      it.extra = d.Ms(50, 2500);
      break;
    case ItemKind::kReplicaCrash: it.length = d.Ms(100, 4000); break;
    case ItemKind::kAgentCrash: it.length = d.Ms(100, 3000); break;
    case ItemKind::kClockStep:
      if (d.Chance(0.5)) it.agent = -1 - it.replica;
      it.extra = d.Ms(-2000, 2000);
      break;
    case ItemKind::kPause:
      it.length = d.Ms(200, 4000);
      if (d.Chance(0.3)) it.key = -1;
      break;
    case ItemKind::kReload: break;
    case ItemKind::kDuplicate: it.extra = d.Ms(50, 2000); break;
    case ItemKind::kDelivery: break;
    case ItemKind::kMemberLeaves: it.length = d.Ms(200, 3000); break;
  }
  return it;
}

// `n` deliveries by `agent` to `key`, each at from + [0, span_ms] with a
// 2-8 s deadline and no cancel: the traffic a fault cluster aims at its key.
void AddDeliveries(Draw& d, Plan& p, int n, int agent, int key,
                   absl::Duration from, int64_t span_ms) {
  for (int i = 0; i < n; ++i) {
    Item it;
    it.kind = ItemKind::kDelivery;
    it.agent = agent;
    it.key = key;
    it.at = from + d.Ms(0, static_cast<int>(span_ms));
    it.deadline = d.Ms(2000, 8000);
    it.cancel_after = absl::InfiniteDuration();
    p.items.push_back(it);
  }
}

// A replica crash with what its holds exist for: a key it owns fails
// around the crash, an agent that held its lease is cut off (from the
// restarted replica, or from the one that stands in for it), and both
// that agent and another keep delivering to the key.
void AddCrashCluster(Draw& d, Plan& p, const wire::Rendezvous& owners) {
  Item crash;
  crash.kind = ItemKind::kReplicaCrash;
  crash.replica = d.Int(0, p.replicas - 1);
  crash.at = d.Ms(2000, absl::ToInt64Milliseconds(p.traffic) - 4000);
  crash.length = d.Ms(100, 1500);
  p.items.push_back(crash);
  int key = d.Int(0, p.keys - 1);
  for (int k = 0; k < p.keys; ++k) {
    if (static_cast<int>(owners.Owner(KeyName(k))) == crash.replica) key = k;
  }
  const absl::Duration outage_at = crash.at - d.Ms(0, 1500);
  AddOutage(p, key, outage_at, d.Ms(2000, 6000));
  Item cut;
  cut.kind = ItemKind::kPartition;
  cut.agent = d.Int(0, p.agents - 1);
  cut.detect = absl::InfiniteDuration();
  if (p.replicas > 1 && d.Chance(0.5)) {
    // Cut off from the replica that stands in for the crashed one.
    const std::vector<size_t> rank = owners.Rank(KeyName(key));
    cut.replica = static_cast<int>(rank[1]);
    cut.at = crash.at - d.Ms(0, 1000);
    cut.length = crash.length + d.Ms(1000, 3000);
  } else {
    // Cut off from the restarted replica: it keeps its old copy and lease.
    cut.replica = crash.replica;
    cut.at = crash.at + crash.length - d.Ms(0, 100);
    cut.length = d.Ms(1000, 3000);
  }
  p.items.push_back(cut);
  for (int agent : {cut.agent, d.Int(0, p.agents - 1)}) {
    const int n = d.Int(4, 12);
    AddDeliveries(d, p, n, agent, key, crash.at - absl::Milliseconds(500),
                  4000);
  }
}

// A link that turns slow, then stalls: the lease's two clocks are what
// must keep an agent that hears late from admitting past its lease.
void AddSlowThenStall(Draw& d, Plan& p, const wire::Rendezvous& owners) {
  Item slow;
  slow.kind = ItemKind::kSlowLink;
  slow.agent = d.Int(0, p.agents - 1);
  slow.replica = d.Int(0, p.replicas - 1);
  slow.at = d.Ms(1000, absl::ToInt64Milliseconds(p.traffic) - 6000);
  slow.length = d.Ms(2000, 5000);
  slow.extra = d.Ms(300, 1500);
  p.items.push_back(slow);
  Item stall;
  stall.kind = ItemKind::kPartition;
  stall.agent = slow.agent;
  stall.replica = slow.replica;
  stall.at = slow.at + d.Ms(500, 2000);
  stall.length = d.Ms(1000, 4000);
  stall.detect = absl::InfiniteDuration();
  p.items.push_back(stall);
  int key = d.Int(0, p.keys - 1);
  for (int k = 0; k < p.keys; ++k) {
    if (static_cast<int>(owners.Owner(KeyName(k))) == slow.replica) key = k;
  }
  const absl::Duration outage_at = stall.at + d.Ms(0, 500);
  AddOutage(p, key, outage_at, d.Ms(2000, 5000));
  for (int agent : {slow.agent, d.Int(0, p.agents - 1)}) {
    const int n = d.Int(4, 12);
    AddDeliveries(d, p, n, agent, key, outage_at, 4000);
  }
}

// A replica's wall clock steps back while late counts are on their way:
// an agent's successes, held up on a slow link, reach the key's owner
// after failures that came later in true time. Stamped on a clock that
// steps back, those failures look older than the successes
// (lease/replica_clock.h).
void AddStepBackDuringLateCounts(Draw& d, Plan& p,
                                 const wire::Rendezvous& owners) {
  const int key = d.Int(0, p.keys - 1);
  const int owner = static_cast<int>(owners.Owner(KeyName(key)));
  const absl::Duration t0 =
      d.Ms(3000, absl::ToInt64Milliseconds(p.traffic) - 5000);
  Item slow;
  slow.kind = ItemKind::kSlowLink;
  slow.agent = d.Int(0, p.agents - 1);
  slow.replica = owner;
  slow.at = t0 - d.Ms(1500, 2500);
  slow.length = d.Ms(3000, 5000);
  slow.extra = d.Ms(800, 1600);
  p.items.push_back(slow);
  AddOutage(p, key, t0, d.Ms(2000, 5000));
  Item step;
  step.kind = ItemKind::kClockStep;
  step.agent = -1 - owner;
  step.at = t0 + d.Ms(0, 300);
  step.extra = -d.Ms(800, 2000);
  p.items.push_back(step);
  // Successes through the slow link before the outage; failures from any
  // agent after it.
  const struct {
    int agent;
    absl::Duration from, to;
  } waves[] = {{slow.agent, t0 - absl::Milliseconds(1200), t0},
               {d.Int(0, p.agents - 1), t0 + absl::Milliseconds(300),
                t0 + absl::Milliseconds(900)}};
  for (const auto& w : waves) {
    const int n = d.Int(3, 8);
    AddDeliveries(d, p, n, w.agent, key, w.from,
                  absl::ToInt64Milliseconds(w.to - w.from));
  }
}

// A stand-in the agent cannot hear of: its link to the key's next replica
// turns slow (that lease lapses, that copy lags), then its owner is cut
// off and heals. Meanwhile the key fails, so the next replica stands in,
// trips and probes; the agent, leased by the owner again, must not take
// the lagging copy's word that nobody stands in.
void AddStandInBehindSlowLink(Draw& d, Plan& p,
                              const wire::Rendezvous& owners) {
  const int key = d.Int(0, p.keys - 1);
  const std::vector<size_t> rank = owners.Rank(KeyName(key));
  const absl::Duration t0 =
      d.Ms(1000, absl::ToInt64Milliseconds(p.traffic) - 9000);
  Item slow;
  slow.kind = ItemKind::kSlowLink;
  slow.agent = d.Int(0, p.agents - 1);
  slow.replica = static_cast<int>(rank[1]);
  slow.at = t0;
  slow.length = d.Ms(4000, 5500);
  slow.extra = d.Ms(1000, 2000);
  p.items.push_back(slow);
  Item cut;
  cut.kind = ItemKind::kPartition;
  cut.agent = slow.agent;
  cut.replica = static_cast<int>(rank[0]);
  cut.at = t0 + d.Ms(1000, 2000);
  cut.detect = d.Ms(300, 900);
  const absl::Duration healed = t0 + slow.length + d.Ms(500, 2000);
  cut.length = healed - cut.at;
  p.items.push_back(cut);
  // Slower still near its end: the next replica hears nothing for longer
  // than a ttl, so it takes this agent's lease there as ended.
  Item slower = slow;
  slower.at = slow.at + slow.length - d.Ms(500, 1200);
  slower.length = d.Ms(600, 1200);
  slower.extra = d.Ms(800, 1500);
  p.items.push_back(slower);
  const absl::Duration outage_at = cut.at + d.Ms(500, 1500);
  AddOutage(p, key, outage_at, healed - outage_at + d.Ms(1000, 2000));
  const int n = d.Int(8, 16);
  AddDeliveries(d, p, n, slow.agent, key, cut.at,
                absl::ToInt64Milliseconds(healed - cut.at) + 1500);
}

// Held calls cut off: a key's owner trips and holds waiting calls from an
// agent, whose stream to it then stalls and breaks (answers it never
// wrote must give their probes back), or whose members drop that replica
// (its held calls must go on to the key's next owner).
void AddHeldCallsCutOff(Draw& d, Plan& p, const wire::Rendezvous& owners) {
  p.held_calls = true;
  const int key = d.Int(0, p.keys - 1);
  const int owner = static_cast<int>(owners.Owner(KeyName(key)));
  const int agent = d.Int(0, p.agents - 1);
  const absl::Duration t0 =
      d.Ms(1000, absl::ToInt64Milliseconds(p.traffic) - 6000);
  AddOutage(p, key, t0, d.Ms(1500, 4000));
  Item cut;
  cut.agent = agent;
  cut.replica = owner;
  cut.at = t0 + d.Ms(500, 2500);
  if (p.replicas > 1 && d.Chance(0.5)) {
    cut.kind = ItemKind::kMemberLeaves;
    cut.length = d.Ms(500, 3000);
  } else {
    cut.kind = ItemKind::kPartition;
    cut.length = d.Ms(1000, 3000);
    cut.detect = d.Ms(100, 900);
  }
  p.items.push_back(cut);
  const int n = d.Int(4, 10);
  const size_t first = p.items.size();
  AddDeliveries(d, p, n, agent, key, t0, 3000);
  for (size_t i = first; i < p.items.size(); ++i) {
    p.items[i].wait = d.Ms(500, 4000);
  }
}

void AddFaults(Draw& d, Plan& p, const wire::Rendezvous& owners) {
  const int outages = d.Int(1, 4);
  for (int i = 0; i < outages; ++i) p.items.push_back(Fault(d, p, ItemKind::kOutage));
  const struct {
    ItemKind kind;
    int lo, hi;
  } kinds[] = {{ItemKind::kPartition, 0, 4},   {ItemKind::kSlowLink, 0, 4},
               {ItemKind::kReplicaCrash, 0, 1}, {ItemKind::kAgentCrash, 0, 1},
               {ItemKind::kClockStep, 0, 2},   {ItemKind::kPause, 0, 1},
               {ItemKind::kReload, 0, 1},      {ItemKind::kDuplicate, 0, 3}};
  for (const auto& k : kinds) {
    const int n = d.Int(k.lo, k.hi);
    for (int i = 0; i < n; ++i) p.items.push_back(Fault(d, p, k.kind));
  }
  if (d.Chance(0.5)) AddCrashCluster(d, p, owners);
  if (d.Chance(0.3)) AddSlowThenStall(d, p, owners);
  if (d.Chance(0.5)) AddStepBackDuringLateCounts(d, p, owners);
  if (p.replicas > 1 && d.Chance(0.3)) AddStandInBehindSlowLink(d, p, owners);
  // Last: the draws above stay as they were before held calls came.
  if (d.Chance(0.4)) AddHeldCallsCutOff(d, p, owners);
}

}  // namespace

uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = seed ^ 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {a, b, c}) {
    x ^= v + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  return x;
}

const char* ItemKindName(ItemKind k) {
  switch (k) {
    case ItemKind::kDelivery: return "delivery";
    case ItemKind::kOutage: return "outage";
    case ItemKind::kPartition: return "partition";
    case ItemKind::kSlowLink: return "slow-link";
    case ItemKind::kReplicaCrash: return "replica-crash";
    case ItemKind::kAgentCrash: return "agent-crash";
    case ItemKind::kClockStep: return "clock-step";
    case ItemKind::kPause: return "pause";
    case ItemKind::kReload: return "reload";
    case ItemKind::kDuplicate: return "duplicate";
    case ItemKind::kMemberLeaves: return "member-leaves";
  }
  return "?";
}

Plan MakePlan(uint64_t seed) {
  Draw d(seed);
  Plan p;
  p.seed = seed;
  p.agents = d.Int(1, 4);
  p.replicas = d.Int(1, 3);
  p.keys = d.Int(2, 8);
  p.workers_per_agent = d.Int(2, 16);
  p.traffic = absl::Seconds(20);
  p.quiet = absl::Seconds(20);
  p.ttl = d.Ms(500, 3000);
  p.flush = d.Ms(100, 500);
  p.latency = d.Ms(1, 30);
  p.save_every = d.Ms(500, 3000);
  for (double& drift : p.drift) drift = d.Real(-0.009, 0.009);
  std::vector<std::string> members;
  for (int r = 0; r < p.replicas; ++r) members.push_back(MemberName(r));
  const wire::Rendezvous owners = *wire::Rendezvous::Create(members);
  AddDeliveries(d, p);
  AddFaults(d, p, owners);
  std::stable_sort(p.items.begin(), p.items.end(),
                   [](const Item& a, const Item& b) { return a.at < b.at; });
  for (size_t i = 0; i < p.items.size(); ++i) p.items[i].id = static_cast<int>(i);
  return p;
}

Plan Plan::Without(const std::vector<int>& drop) const {
  Plan p = *this;
  p.items.clear();
  for (const Item& it : items) {
    if (std::find(drop.begin(), drop.end(), it.id) == drop.end()) {
      p.items.push_back(it);
    }
  }
  return p;
}

std::string Plan::Size() const {
  int deliveries = 0;
  for (const Item& it : items) deliveries += it.kind == ItemKind::kDelivery;
  return absl::StrFormat(
      "%d agents, %d replicas, %d keys, %d s (+%d s quiet), %d deliveries, "
      "%d faults, ttl %s, flush %s%s",
      agents, replicas, keys, absl::ToInt64Seconds(traffic),
      absl::ToInt64Seconds(quiet), deliveries,
      static_cast<int>(items.size()) - deliveries, absl::FormatDuration(ttl),
      absl::FormatDuration(flush), held_calls ? ", held calls" : "");
}

namespace {

void DescribeDelivery(const Item& it, std::string* s) {
  absl::StrAppend(s, " agent ", it.agent, " key ", it.key);
  if (it.wait > absl::ZeroDuration()) {
    absl::StrAppend(s, " waits ", absl::FormatDuration(it.wait));
  }
  if (it.cancel_after != absl::InfiniteDuration()) {
    absl::StrAppend(s, " cancelled after ",
                    absl::FormatDuration(it.cancel_after));
  }
}

}  // namespace

std::string Describe(const Item& it) {
  std::string s = absl::StrFormat("#%d %7.3fs %s", it.id,
                                  absl::ToDoubleSeconds(it.at),
                                  ItemKindName(it.kind));
  switch (it.kind) {
    case ItemKind::kDelivery:
      DescribeDelivery(it, &s);
      break;
    case ItemKind::kOutage:
      absl::StrAppend(&s, " key ", it.key, " for ",
                      absl::FormatDuration(it.length));
      break;
    case ItemKind::kPartition:
      absl::StrAppend(&s, " agent ", it.agent, " / replica ", it.replica,
                      " for ", absl::FormatDuration(it.length),
                      it.detect == absl::InfiniteDuration()
                          ? ", stream stalls"
                          : absl::StrCat(", stream breaks after ",
                                         absl::FormatDuration(it.detect)));
      break;
    case ItemKind::kSlowLink:
      absl::StrAppend(&s, " agent ", it.agent, " / replica ", it.replica, " +",
                      absl::FormatDuration(it.extra), " for ",
                      absl::FormatDuration(it.length));
      break;
    case ItemKind::kReplicaCrash:
      absl::StrAppend(&s, " replica ", it.replica, " down ",
                      absl::FormatDuration(it.length));
      break;
    case ItemKind::kAgentCrash:
      absl::StrAppend(&s, " agent ", it.agent, " down ",
                      absl::FormatDuration(it.length));
      break;
    case ItemKind::kClockStep:
      absl::StrAppend(&s, it.agent >= 0 ? " agent " : " replica ",
                      it.agent >= 0 ? it.agent : -1 - it.agent, " by ",
                      absl::FormatDuration(it.extra));
      break;
    case ItemKind::kPause:
      absl::StrAppend(&s, it.key < 0 ? " every key (prefix)"
                                     : absl::StrCat(" key ", it.key),
                      " for ", absl::FormatDuration(it.length));
      break;
    case ItemKind::kReload: break;
    case ItemKind::kDuplicate:
      absl::StrAppend(&s, " agent ", it.agent, " / replica ", it.replica,
                      ", again ", absl::FormatDuration(it.extra), " later");
      break;
    case ItemKind::kMemberLeaves:
      absl::StrAppend(&s, " agent ", it.agent, " drops replica ", it.replica,
                      " for ", absl::FormatDuration(it.length));
      break;
  }
  return s;
}

}  // namespace stagger::protocol_sim
