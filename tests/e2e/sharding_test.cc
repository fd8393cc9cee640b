// Sharding over three real staggerd replicas on loopback, through the
// client library.
//
//   * 10,000 keys spread within +-10% per replica; every one lands on its
//     owner and no replica counts a misrouted request; a batch is split by
//     owner and its answers come back in order; a request sent to a
//     non-owner is answered and counted.
//   * A breaker tripped by workers spread over three clients trips once,
//     on the owner; the other replicas never see the key.
//   * kill -9 of one replica under load: only its keys move (each to its
//     next choice), no call waits past its deadline (plus a generous
//     margin), every call is answered, and its keys return when it
//     restarts on the same address.
//   * A draining replica (SIGTERM with a drain grace: health NOT_SERVING,
//     still answering) is skipped while it is still up: its keys go to
//     their next choices before it stops.
//   * Membership changes (a dns:/// target whose members are scripted
//     through ClientOptions::resolve_members): a replica that joins takes
//     only keys from the others, one that leaves gives up only its own,
//     and every call still lands on its (new) owner.
// Replicas are named stagger-0..2 (--replicas / --replica_name) and the
// client is given "stagger-i=127.0.0.1:PORT,...". Every wait polls with a
// generous deadline; the figures printed ("[figures] ...") are for
// docs/REPLICAS.md, not asserted beyond the bounds above.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "gtest/gtest.h"
#include "core/wire/rendezvous.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/requests.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/staggerd_process.h"

namespace stagger::e2e {
namespace {

using client::ClientDecision;
using client::ClientOptions;
using client::CoordinatorClient;
using client::DecisionSource;
using engine::Outcome;
using engine::Verdict;
using stagger::testing::AdmitOf;
using stagger::testing::PollUntil;
using stagger::testing::ReportOf;
using stagger::testing::ScrapeMetric;
using stagger::testing::StaggerdProcess;

constexpr int kReplicas = 3;
constexpr char kMisrouted[] = "stagger_misrouted_requests_total";

std::string Name(int i) { return absl::StrCat("stagger-", i); }

// Three staggerd processes named stagger-0..2, each knowing all three.
class ShardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kReplicas; ++i) {
      Start(i, "127.0.0.1:0");
      ASSERT_NE(servers_[i], nullptr);
      ports_[i] = servers_[i]->grpc_port();
    }
    std::vector<std::string> entries;
    for (int i = 0; i < kReplicas; ++i) {
      entries.push_back(absl::StrCat(Name(i), "=127.0.0.1:", ports_[i]));
      stubs_[i] = v1::RetryCoordinator::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", ports_[i]),
          grpc::InsecureChannelCredentials()));
    }
    target_ = absl::StrJoin(entries, ",");
  }

  absl::StatusOr<std::unique_ptr<StaggerdProcess>> Spawn(
      int i, const std::string& address) {
    return StaggerdProcess::Start(
        STAGGERD_PATH,
        {absl::StrCat("--address=", address), "--metrics_address=127.0.0.1:0",
         absl::StrCat("--config=", E2E_CONFIG),
         "--replicas=stagger-0,stagger-1,stagger-2",
         absl::StrCat("--replica_name=", Name(i)), "--drain_grace=60s"});
  }
  void Start(int i, const std::string& address) {
    absl::StatusOr<std::unique_ptr<StaggerdProcess>> p = Spawn(i, address);
    ASSERT_TRUE(p.ok()) << p.status();
    servers_[i] = *std::move(p);
  }
  // Replica i again on its old port. A client reconnecting to the dead
  // port can be given that very port as its own (a TCP self-connect on
  // loopback, until gRPC drops the connection), so a bind that finds it in
  // use is retried for up to 10 s.
  void Restart(int i) {
    const std::string address = absl::StrCat("127.0.0.1:", ports_[i]);
    absl::Status last;
    for (int attempt = 0; attempt < 20; ++attempt) {
      absl::StatusOr<std::unique_ptr<StaggerdProcess>> p = Spawn(i, address);
      if (p.ok()) {
        servers_[i] = *std::move(p);
        return;
      }
      last = p.status();
      absl::SleepFor(absl::Milliseconds(500));
    }
    FAIL() << "restarting " << Name(i) << " on " << address << ": " << last;
  }

  std::unique_ptr<CoordinatorClient> NewClient(
      absl::Duration deadline = absl::Seconds(1)) {
    ClientOptions o;
    o.target = target_;
    o.call_deadline = deadline;
    absl::StatusOr<std::unique_ptr<CoordinatorClient>> c =
        CoordinatorClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    (*c)->WaitForCoordinator(absl::Seconds(10));
    return *std::move(c);
  }

  // Every key replica i tracks (ListEndpoints, all pages).
  std::set<std::string> Tracked(int i) {
    std::set<std::string> keys;
    std::string token;
    do {
      v1::ListEndpointsRequest req;
      req.set_page_size(1000);
      req.set_page_token(token);
      v1::ListEndpointsResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      const grpc::Status s = stubs_[i]->ListEndpoints(&ctx, req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) break;
      for (const auto& e : resp.endpoints()) keys.insert(e.endpoint());
      token = resp.next_page_token();
    } while (!token.empty());
    return keys;
  }

  double Misrouted(int i) {
    return ScrapeMetric(servers_[i]->metrics_port(), kMisrouted).value_or(-1);
  }

  std::unique_ptr<StaggerdProcess> servers_[kReplicas];
  int ports_[kReplicas] = {};
  std::unique_ptr<v1::RetryCoordinator::Stub> stubs_[kReplicas];
  std::string target_;
};

int IndexOf(const std::string& name) { return name.back() - '0'; }

TEST_F(ShardingTest, TenThousandKeysSpreadEvenlyEachOnItsOwner) {
  std::unique_ptr<CoordinatorClient> c = NewClient();
  ASSERT_NE(c, nullptr);
  constexpr int kKeys = 10000;
  std::vector<std::string> keys;
  std::map<int, std::set<std::string>> owned;
  for (int k = 0; k < kKeys; ++k) {
    keys.push_back(absl::StrCat("https://tenant-", k, ".example/hook"));
    owned[IndexOf(c->OwnerOf(keys.back()).name)].insert(keys.back());
  }
  // Single calls for the first half, batches of 250 (split by owner) for
  // the rest.
  for (int k = 0; k < kKeys / 2; ++k) {
    absl::StatusOr<ClientDecision> d = c->Admit(AdmitOf(keys[k], 1));
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->source, DecisionSource::kCoordinator) << d->fallback_cause;
  }
  for (int k = kKeys / 2; k < kKeys; k += 250) {
    std::vector<client::AdmitRequest> batch;
    for (int j = k; j < k + 250; ++j) {
      batch.push_back(AdmitOf(keys[j], 1 + j % 3));  // attempt marks order
    }
    absl::StatusOr<std::vector<ClientDecision>> got = c->AdmitBatch(batch);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), batch.size());
    for (size_t j = 0; j < got->size(); ++j) {
      EXPECT_EQ((*got)[j].attempt, batch[j].attempt) << "answer out of order";
      EXPECT_EQ((*got)[j].source, DecisionSource::kCoordinator);
    }
  }
  std::string figures;
  for (int i = 0; i < kReplicas; ++i) {
    const std::set<std::string> tracked = Tracked(i);
    EXPECT_EQ(tracked, owned[i]) << Name(i) << " holds keys it does not own";
    const double share = static_cast<double>(tracked.size()) / kKeys;
    EXPECT_GE(share, 0.9 / kReplicas) << Name(i);
    EXPECT_LE(share, 1.1 / kReplicas) << Name(i);
    EXPECT_EQ(Misrouted(i), 0) << Name(i);
    absl::StrAppend(&figures, " ", Name(i), "=", tracked.size());
  }
  std::printf("[figures] 10000 keys over 3 replicas:%s\n", figures.c_str());

  // A request a stale client sends to a replica that does not own its key
  // is answered, and counted there.
  const std::string& stray = *owned[1].begin();
  v1::AdmitRequest req;
  req.set_endpoint(stray);
  req.set_attempt(1);
  v1::AdmitResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ASSERT_TRUE(stubs_[0]->Admit(&ctx, req, &resp).ok());
  EXPECT_TRUE(resp.has_decision());
  EXPECT_TRUE(PollUntil([&] { return Misrouted(0) == 1; }));
  EXPECT_EQ(Misrouted(1), 0);
}

TEST_F(ShardingTest, ABreakerTrippedFromEveryClientTripsOnceOnTheOwner) {
  // Three worker processes' clients. The e2e/fast/ breaker trips at 5
  // consecutive failures: they come round-robin from the three clients
  // (2, 2 and 1 each), so it trips only if they all land on one breaker.
  std::vector<std::unique_ptr<CoordinatorClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(NewClient());
    ASSERT_NE(clients.back(), nullptr);
  }
  const std::string key = "e2e/fast/sharded-breaker";
  const int owner = IndexOf(clients[0]->OwnerOf(key).name);
  for (int n = 0; n < 5; ++n) {
    absl::StatusOr<ClientDecision> d = clients[n % 3]->Report(
        ReportOf(key, 1, Outcome::kRetryableFailure));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->source, DecisionSource::kCoordinator);
    if (n < 4) {
      EXPECT_EQ(d->verdict, Verdict::kProceed) << "failure " << n + 1;
    } else {
      EXPECT_EQ(d->verdict, Verdict::kDefer) << "the 5th failure trips it";
      EXPECT_EQ(d->reason, engine::Reason::kCircuitOpen);
    }
  }

  v1::GetEndpointRequest req;
  req.set_endpoint(key);
  for (int i = 0; i < kReplicas; ++i) {
    v1::GetEndpointResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status s = stubs_[i]->GetEndpoint(&ctx, req, &resp);
    if (i == owner) {
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resp.state().consecutive_trips(), 1) << "tripped more than once";
      EXPECT_NE(resp.state().breaker_state(), v1::CLOSED);
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Name(i);
    }
  }
}

// One call under load: which key, how long it took, what came back.
struct CallRecord {
  int key = 0;
  absl::Time start;
  absl::Duration took;
  DecisionSource source = DecisionSource::kCoordinator;
  bool ok = false;
};

TEST_F(ShardingTest, KillingOneReplicaMovesOnlyItsKeysAndTheyReturn) {
  constexpr absl::Duration kDeadline = absl::Milliseconds(200);
  std::unique_ptr<CoordinatorClient> c = NewClient(kDeadline);
  ASSERT_NE(c, nullptr);
  constexpr int kKeys = 600;
  std::vector<std::string> keys;
  std::vector<std::vector<size_t>> rank;  // per key, replica indices
  absl::StatusOr<wire::Rendezvous> ring =
      wire::Rendezvous::Create({Name(0), Name(1), Name(2)});
  ASSERT_TRUE(ring.ok());
  for (int k = 0; k < kKeys; ++k) {
    keys.push_back(absl::StrCat("https://load-", k, ".example/"));
    rank.push_back(ring->Rank(keys.back()));
    ASSERT_EQ(Name(static_cast<int>(rank.back()[0])), c->OwnerOf(keys[k]).name);
  }
  const int victim = 1;

  absl::Mutex mu;
  std::vector<CallRecord> records;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 6; ++t) {
    workers.emplace_back([&, t] {
      for (int n = 0; !stop.load(); ++n) {
        CallRecord r;
        r.key = (t * 97 + n * 13) % kKeys;
        r.start = absl::Now();
        absl::StatusOr<ClientDecision> d =
            n % 2 == 0 ? c->Admit(AdmitOf(keys[r.key], 1))
                       : c->Report(ReportOf(keys[r.key], 1, Outcome::kSuccess));
        r.took = absl::Now() - r.start;
        r.ok = d.ok();
        if (d.ok()) r.source = d->source;
        absl::MutexLock l(&mu);
        records.push_back(r);
      }
    });
  }
  const auto calls = [&] {
    absl::MutexLock l(&mu);
    return records.size();
  };
  ASSERT_TRUE(PollUntil([&] { return calls() > 2000; }));

  // kill -9 under load.
  const absl::Time killed_at = absl::Now();
  servers_[victim]->Kill();
  const size_t at_kill = calls();
  ASSERT_TRUE(PollUntil([&] { return calls() > at_kill + 3000; }));

  // While it is down: the survivors hold only their own keys and the
  // victim's keys' next choices -- nothing else moved.
  for (int i = 0; i < kReplicas; ++i) {
    if (i == victim) continue;
    for (const std::string& k : Tracked(i)) {
      const int key = std::stoi(k.substr(k.find('-') + 1));
      const size_t owner = rank[key][0];
      const bool own = owner == static_cast<size_t>(i);
      const bool next_choice = owner == static_cast<size_t>(victim) &&
                               rank[key][1] == static_cast<size_t>(i);
      EXPECT_TRUE(own || next_choice)
          << k << " moved to " << Name(i) << " though its owner is "
          << Name(static_cast<int>(owner));
    }
  }

  // Restart on the same address: its keys return.
  const absl::Time restarted_at = absl::Now();
  Restart(victim);
  ASSERT_NE(servers_[victim], nullptr);
  std::set<std::string> victims_keys;
  for (int k = 0; k < kKeys; ++k) {
    if (rank[k][0] == static_cast<size_t>(victim)) victims_keys.insert(keys[k]);
  }
  absl::Time returned_at;
  EXPECT_TRUE(PollUntil(
      [&] {
        if (Tracked(victim).size() < victims_keys.size() / 2) return false;
        returned_at = absl::Now();
        return true;
      },
      absl::Seconds(30)))
      << "the restarted replica got back " << Tracked(victim).size() << " of "
      << victims_keys.size() << " keys";
  stop.store(true);
  for (auto& w : workers) w.join();
  for (const std::string& k : Tracked(victim)) {
    EXPECT_TRUE(victims_keys.count(k)) << k << " is not the victim's own";
  }

  // Every call answered; none waited past its deadline (+1 s of slack for a
  // loaded machine: the bound is the deadline, not a latency target).
  absl::Duration worst;
  int fallbacks_after_kill = 0;
  absl::Time last_fallback = killed_at;
  for (const CallRecord& r : records) {
    EXPECT_TRUE(r.ok) << "call for key " << r.key << " failed";
    worst = std::max(worst, r.took);
    if (r.start >= killed_at && r.source == DecisionSource::kLocalFallback) {
      ++fallbacks_after_kill;
      last_fallback = std::max(last_fallback, r.start);
    }
  }
  EXPECT_LE(worst, kDeadline + absl::Seconds(1));
  std::printf(
      "[figures] calls=%zu deadline=%s worst_call=%s fallbacks_after_kill=%d "
      "last_fallback_after_kill=%s keys_back_after_restart=%s\n",
      records.size(), absl::FormatDuration(kDeadline).c_str(),
      absl::FormatDuration(worst).c_str(), fallbacks_after_kill,
      absl::FormatDuration(last_fallback - killed_at).c_str(),
      absl::FormatDuration(returned_at - restarted_at).c_str());
}

TEST_F(ShardingTest, ADrainingReplicaIsSkippedWhileItStillAnswers) {
  std::unique_ptr<CoordinatorClient> c = NewClient();
  ASSERT_NE(c, nullptr);
  const int victim = 2;
  std::vector<std::string> its_keys;
  for (int k = 0; its_keys.size() < 20; ++k) {
    const std::string key = absl::StrCat("https://drain-", k, ".example/");
    if (c->OwnerOf(key).name == Name(victim)) its_keys.push_back(key);
  }
  for (const std::string& k : its_keys) {
    ASSERT_TRUE(c->Admit(AdmitOf(k, 1)).ok());
  }
  ASSERT_EQ(Tracked(victim).size(), its_keys.size());

  // SIGTERM: NOT_SERVING for the 60 s drain grace, while it still answers.
  servers_[victim]->Signal(SIGTERM);
  ASSERT_TRUE(servers_[victim]->WaitForOutput("draining"));
  EXPECT_TRUE(PollUntil([&] {
    for (const std::string& k : its_keys) {
      absl::StatusOr<ClientDecision> d = c->Admit(AdmitOf(k, 1));
      if (!d.ok() || d->source != DecisionSource::kCoordinator) return false;
    }
    // Every key answered by a replica, and the draining one got none of
    // these calls: its keys are on their next choices.
    size_t moved = 0;
    for (int i = 0; i < kReplicas; ++i) {
      if (i == victim) continue;
      for (const std::string& k : Tracked(i)) {
        moved += std::count(its_keys.begin(), its_keys.end(), k);
      }
    }
    return moved == its_keys.size();
  })) << "the draining replica's keys did not move";
  // It is still up (drain grace).
  const double misrouted_before = Misrouted(0) + Misrouted(1);
  EXPECT_GT(misrouted_before, 0);  // the next choices counted them
  EXPECT_EQ(servers_[victim]->WaitForExit(absl::Milliseconds(1)).ok(), false);
}

// The members a dns:/// target resolves to, set by the test.
class ScriptedMembers {
 public:
  void Set(std::vector<client::Member> members) {
    absl::MutexLock l(&mu_);
    members_ = std::move(members);
  }
  client::MemberResolver Resolver() {
    return [this](absl::string_view, absl::string_view)
               -> absl::StatusOr<std::vector<client::Member>> {
      absl::MutexLock l(&mu_);
      return members_;
    };
  }

 private:
  absl::Mutex mu_;
  std::vector<client::Member> members_;
};

TEST_F(ShardingTest, AMembershipChangeMovesOnlyTheKeysOfTheReplicaThatCameOrWent) {
  auto members = [&](std::vector<int> ids) {
    std::vector<client::Member> out;
    for (int i : ids) {
      out.push_back({Name(i), absl::StrCat("127.0.0.1:", ports_[i])});
    }
    return out;
  };
  ScriptedMembers dns;
  dns.Set(members({0, 1}));
  ClientOptions o;
  o.target = "dns:///stagger-headless.test:50051";
  o.resolve_members = dns.Resolver();
  o.dns_refresh = absl::Milliseconds(100);
  o.call_deadline = absl::Seconds(1);
  auto c = CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->WaitForCoordinator(absl::Seconds(10));

  constexpr int kKeys = 1000;
  std::vector<std::string> keys;
  std::map<std::string, std::string> owner;  // key -> replica name
  for (int k = 0; k < kKeys; ++k) {
    keys.push_back(absl::StrCat("https://tenant-", k, ".example/hook"));
    owner[keys.back()] = (*c)->OwnerOf(keys.back()).name;
    ASSERT_NE(owner[keys.back()], Name(2)) << "stagger-2 is not a member yet";
  }
  // Every call lands on the owner the client names now.
  auto admit_all_on_owners = [&] {
    for (const std::string& key : keys) {
      absl::StatusOr<ClientDecision> d = (*c)->Admit(AdmitOf(key, 1));
      ASSERT_TRUE(d.ok()) << d.status();
      ASSERT_EQ(d->source, DecisionSource::kCoordinator) << d->fallback_cause;
    }
  };

  // stagger-2 joins: it takes about a third, and only from the others.
  dns.Set(members({0, 1, 2}));
  ASSERT_TRUE(PollUntil([&] { return (*c)->replicas().size() == 3; }));
  std::set<std::string> joined;
  for (const std::string& key : keys) {
    const std::string now = (*c)->OwnerOf(key).name;
    if (now != owner[key]) {
      EXPECT_EQ(now, Name(2)) << key << " moved between the old members";
      joined.insert(key);
    }
    owner[key] = now;
  }
  EXPECT_GE(joined.size(), kKeys / 5u);
  EXPECT_LE(joined.size(), kKeys / 2u);
  ASSERT_NO_FATAL_FAILURE(admit_all_on_owners());
  EXPECT_EQ(Tracked(2), joined) << "stagger-2 holds exactly the keys it took";

  // stagger-1 leaves: only its keys move.
  dns.Set(members({0, 2}));
  ASSERT_TRUE(PollUntil([&] { return (*c)->replicas().size() == 2; }));
  int left = 0;
  for (const std::string& key : keys) {
    const std::string now = (*c)->OwnerOf(key).name;
    if (owner[key] == Name(1)) {
      EXPECT_NE(now, Name(1));
      ++left;
    } else {
      EXPECT_EQ(now, owner[key]) << key << " moved though its owner stayed";
    }
  }
  EXPECT_GT(left, 0);
  ASSERT_NO_FATAL_FAILURE(admit_all_on_owners());
  // (The replicas' --replicas lists all three throughout, so they count
  // the client's two-member phases as misrouted: that is what the metric
  // is for, a client and the servers disagreeing on the members.)
  EXPECT_GT(Misrouted(0) + Misrouted(1) + Misrouted(2), 0);
  std::printf("[figures] membership: stagger-2 joined and took %zu of %d "
              "keys; stagger-1 left with %d\n",
              joined.size(), kKeys, left);
}

}  // namespace
}  // namespace stagger::e2e
