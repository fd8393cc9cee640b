// The watch and disabled endpoints over three real staggerd replicas
// (stagger-0..2, --replicas, each with a state file), through the client
// library: a CoordinatorClient routing by owner, and client::Watcher
// keeping a stream to every replica.
//
//   * A watcher sees an endpoint's story on its owner, in order, numbered
//     without a gap: a trip, the Retry-After window, a pause and a disable
//     (sent to every replica with one operation id: delivered once by a
//     deduplicating watcher, once per replica by one that keeps all).
//   * The watcher stops (a killed process) and a new one starts from its
//     tokens: the events made meanwhile arrive, none twice, none missed.
//   * One replica is killed with -9 and restarted on its port: its watcher
//     is told RESTARTED; the other replicas' events are complete.
//   * Disable end to end: by hand (Admit answers GIVE_UP ENDPOINT_DISABLED,
//     Enable lets it go again, a disable survives a drain and restart),
//     and automatic, by permanent failures and by a breaker away from
//     CLOSED (found by the refresher with no traffic).
// Every wait polls with a generous deadline.
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/watch.h"
#include "core/wire/rendezvous.h"
#include "gtest/gtest.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/files.h"
#include "tests/testing/requests.h"
#include "tests/testing/staggerd_process.h"

namespace stagger::e2e {
namespace {

using client::EventKind;
using client::WatchEvent;
using client::WatchNotice;
using engine::Outcome;
using stagger::testing::AdmitOf;
using stagger::testing::PollUntil;
using stagger::testing::ReportOf;
using stagger::testing::StaggerdProcess;

constexpr int kReplicas = 3;

std::string Name(int i) { return absl::StrCat("stagger-", i); }

// Breakers trip after 3 failures and half-open within a second; 3
// permanent failures within a minute disable; a breaker away from CLOSED
// for 2 s disables endpoints under "e2e/unavailable/".
constexpr char kConfig[] = R"(
default_policy {
  breaker { consecutive_failures: 3 open_base { nanos: 300000000 }
            open_max { nanos: 500000000 } half_open_probes: 1
            close_after_successes: 1 }
  backoff { retry_after_max { seconds: 60 } }
  disable { permanent_failures: 3 window { seconds: 60 } }
}
overrides {
  prefix: "e2e/unavailable/"
  policy { disable { after_unavailable { seconds: 2 } } }
}
)";

// Everything a Watcher gave, thread-safe.
class Seen {
 public:
  void Event(const WatchEvent& e) {
    absl::MutexLock l(&mu_);
    events_.push_back(e);
  }
  void Notice(const WatchNotice& n) {
    absl::MutexLock l(&mu_);
    notices_.push_back(n);
  }
  std::vector<WatchEvent> events() const {
    absl::MutexLock l(&mu_);
    return events_;
  }
  std::vector<WatchNotice> notices() const {
    absl::MutexLock l(&mu_);
    return notices_;
  }
  // Events of `replica`'s incarnation `inc` (0: any).
  std::vector<WatchEvent> Of(const std::string& replica,
                             uint64_t inc = 0) const {
    std::vector<WatchEvent> out;
    for (const WatchEvent& e : events()) {
      if (e.replica == replica && (inc == 0 || e.incarnation == inc)) {
        out.push_back(e);
      }
    }
    return out;
  }
  bool Has(EventKind kind, const std::string& endpoint) const {
    for (const WatchEvent& e : events()) {
      if (e.kind == kind && e.endpoint == endpoint) return true;
    }
    return false;
  }
  int Count(EventKind kind, const std::string& endpoint) const {
    int n = 0;
    for (const WatchEvent& e : events()) n += e.kind == kind && e.endpoint == endpoint;
    return n;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<WatchNotice> notices_ ABSL_GUARDED_BY(mu_);
};

// Sequence numbers of `events`, which must run on without a gap.
void ExpectContiguous(const std::vector<WatchEvent>& events,
                      const std::string& what) {
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].sequence, events[i - 1].sequence + 1)
        << what << ": " << EventKindName(events[i - 1].kind) << " #"
        << events[i - 1].sequence << " then " << EventKindName(events[i].kind)
        << " #" << events[i].sequence;
  }
}

class WatchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    config_ = dir_ / "config.textproto";
    ASSERT_TRUE(stagger::testing::WriteFile(config_, kConfig));
    for (int i = 0; i < kReplicas; ++i) {
      Start(i, "127.0.0.1:0");
      ASSERT_NE(servers_[i], nullptr);
      ports_[i] = servers_[i]->grpc_port();
    }
    std::vector<std::string> entries;
    for (int i = 0; i < kReplicas; ++i) {
      entries.push_back(absl::StrCat(Name(i), "=127.0.0.1:", ports_[i]));
    }
    target_ = absl::StrJoin(entries, ",");
    client::ClientOptions o;
    o.target = target_;
    o.call_deadline = absl::Seconds(2);
    auto c = client::CoordinatorClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    client_->WaitForCoordinator(absl::Seconds(10));
    auto r = wire::Rendezvous::Create({Name(0), Name(1), Name(2)});
    ASSERT_TRUE(r.ok());
    ring_ = std::make_unique<wire::Rendezvous>(*r);
  }

  void Start(int i, const std::string& address) {
    auto p = StaggerdProcess::Start(
        STAGGERD_PATH,
        {absl::StrCat("--address=", address), "--metrics_address=",
         absl::StrCat("--config=", config_),
         "--replicas=stagger-0,stagger-1,stagger-2",
         absl::StrCat("--replica_name=", Name(i)),
         absl::StrCat("--state_file=", dir_ / (Name(i) + ".snap")),
         "--state_save_interval=1s"});
    ASSERT_TRUE(p.ok()) << p.status();
    servers_[i] = *std::move(p);
  }
  // Replica i again on its old port (retried while a reconnecting client
  // holds it, as the sharding test does).
  void Restart(int i) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto p = StaggerdProcess::Start(
          STAGGERD_PATH,
          {absl::StrCat("--address=127.0.0.1:", ports_[i]),
           "--metrics_address=", absl::StrCat("--config=", config_),
           "--replicas=stagger-0,stagger-1,stagger-2",
           absl::StrCat("--replica_name=", Name(i)),
           absl::StrCat("--state_file=", dir_ / (Name(i) + ".snap")),
           "--state_save_interval=1s"});
      if (p.ok()) {
        servers_[i] = *std::move(p);
        return;
      }
      absl::SleepFor(absl::Milliseconds(500));
    }
    FAIL() << "could not restart " << Name(i);
  }

  // A key under `prefix` that replica `owner` owns.
  std::string KeyOwnedBy(int owner, const std::string& prefix) {
    for (int n = 0;; ++n) {
      std::string key = absl::StrCat(prefix, n);
      if (static_cast<int>(ring_->Owner(key)) == owner) return key;
    }
  }

  std::unique_ptr<client::Watcher> Watch(Seen* seen, bool dedup = true,
                                         std::map<std::string, std::string>
                                             tokens = {}) {
    client::WatchOptions o;
    o.target = target_;
    o.deduplicate = dedup;
    o.resume_tokens = std::move(tokens);
    o.reconnect_backoff = absl::Milliseconds(200);
    auto w = client::Watcher::Start(
        o, [seen](const WatchEvent& e) { seen->Event(e); },
        [seen](const WatchNotice& n) { seen->Notice(n); });
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return nullptr;
    // Every stream up before anything happens.
    EXPECT_TRUE(PollUntil([seen] {
      std::set<std::string> up;
      for (const WatchNotice& n : seen->notices()) {
        if (n.kind == WatchNotice::Kind::kConnected) up.insert(n.member);
      }
      return up.size() == kReplicas;
    }));
    return *std::move(w);
  }

  // An Admin call on every replica, one operation id.
  void OnEveryReplica(const std::string& what, const std::string& key,
                      const std::string& op) {
    for (int i = 0; i < kReplicas; ++i) {
      auto admin = v1::Admin::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", ports_[i]),
          grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      grpc::Status s;
      if (what == "pause") {
        v1::PauseRequest req;
        req.mutable_target()->set_endpoint(key);
        req.mutable_duration()->set_seconds(600);
        req.set_reason("tenant maintenance");
        req.set_operation_id(op);
        v1::PauseResponse resp;
        s = admin->Pause(&ctx, req, &resp);
      } else if (what == "resume") {
        v1::ResumeRequest req;
        req.mutable_target()->set_endpoint(key);
        req.set_operation_id(op);
        v1::ResumeResponse resp;
        s = admin->Resume(&ctx, req, &resp);
      } else if (what == "disable") {
        v1::DisableRequest req;
        req.set_endpoint(key);
        req.set_reason("tenant deleted the endpoint");
        req.set_operation_id(op);
        v1::DisableResponse resp;
        s = admin->Disable(&ctx, req, &resp);
      } else {
        v1::EnableRequest req;
        req.set_endpoint(key);
        req.set_operation_id(op);
        v1::EnableResponse resp;
        s = admin->Enable(&ctx, req, &resp);
      }
      ASSERT_TRUE(s.ok()) << what << " on " << Name(i) << ": "
                          << s.error_message();
    }
  }

  client::ClientDecision Admit(const std::string& key, int attempt = 1) {
    auto d = client_->Admit(AdmitOf(key, attempt));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : client::ClientDecision{};
  }
  void Report(const std::string& key, Outcome o,
              std::optional<absl::Duration> ra = std::nullopt) {
    auto d = client_->Report(ReportOf(key, 1, o, ra));
    EXPECT_TRUE(d.ok()) << d.status();
  }
  void Trip(const std::string& key) {
    for (int i = 0; i < 3; ++i) Report(key, Outcome::kRetryableFailure);
  }

  stagger::testing::ScratchDir dir_;
  std::string config_;
  std::unique_ptr<StaggerdProcess> servers_[kReplicas];
  int ports_[kReplicas] = {};
  std::string target_;
  std::unique_ptr<client::CoordinatorClient> client_;
  std::unique_ptr<wire::Rendezvous> ring_;
};

TEST_F(WatchE2eTest, AStoryInOrderAResumeThatMissesNothingAndAKilledReplica) {
  const int owner = 1;
  const std::string key = KeyOwnedBy(owner, "https://tenant.example/hooks/");
  Seen all;  // every replica's copy of an operator's command
  auto keep_all = Watch(&all, /*dedup=*/false);
  Seen seen;
  auto watcher = Watch(&seen);
  ASSERT_NE(watcher, nullptr);

  // The story, on the owner: a trip, a Retry-After window, a pause and a
  // disable (the last two on every replica, one id each).
  Trip(key);
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kBreakerOpened, key); }));
  Report(key, Outcome::kRateLimited, absl::Seconds(30));
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kRetryAfterSet, key); }));
  OnEveryReplica("pause", key, "op-pause-1");
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kPaused, key); }));
  OnEveryReplica("disable", key, "op-disable-1");
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kDisabled, key); }));
  EXPECT_EQ(Admit(key).reason, engine::Reason::kEndpointDisabled);

  // In order, numbered without a gap on the owner's log.
  ASSERT_TRUE(PollUntil([&] {
    return all.Count(EventKind::kDisabled, key) == kReplicas;
  }));
  const std::vector<WatchEvent> story = all.Of(Name(owner));
  ExpectContiguous(story, Name(owner));
  std::vector<EventKind> order;
  for (const WatchEvent& e : story) {
    if (e.endpoint != key) continue;
    if (e.kind == EventKind::kBreakerOpened || e.kind == EventKind::kRetryAfterSet ||
        e.kind == EventKind::kPaused || e.kind == EventKind::kDisabled) {
      order.push_back(e.kind);
    }
  }
  EXPECT_EQ(order, (std::vector<EventKind>{EventKind::kBreakerOpened,
                                           EventKind::kRetryAfterSet,
                                           EventKind::kPaused,
                                           EventKind::kDisabled}));
  // An operator's command: once per replica undeduplicated, once deduped.
  EXPECT_EQ(all.Count(EventKind::kPaused, key), kReplicas);
  EXPECT_EQ(seen.Count(EventKind::kPaused, key), 1);
  EXPECT_EQ(seen.Count(EventKind::kDisabled, key), 1);
  for (const WatchEvent& e : seen.events()) {
    if (e.kind == EventKind::kDisabled) {
      EXPECT_EQ(e.operation_id, "op-disable-1");
      EXPECT_EQ(e.disable_trigger, "OPERATOR");
      EXPECT_EQ(e.reason, "tenant deleted the endpoint");
    }
  }

  // The watcher dies; events happen; a new one resumes from its tokens.
  watcher->Stop();
  const std::map<std::string, std::string> tokens = watcher->resume_tokens();
  ASSERT_EQ(tokens.size(), static_cast<size_t>(kReplicas));
  const std::vector<WatchEvent> before = seen.events();
  OnEveryReplica("enable", key, "op-enable-1");
  OnEveryReplica("resume", key, "op-resume-1");
  const std::string other = KeyOwnedBy(2, "https://other.example/hooks/");
  Trip(other);
  ASSERT_TRUE(PollUntil([&] { return all.Has(EventKind::kBreakerOpened, other); }));
  Seen resumed;
  auto again = Watch(&resumed, /*dedup=*/true, tokens);
  ASSERT_TRUE(PollUntil([&] {
    return resumed.Has(EventKind::kEnabled, key) &&
           resumed.Has(EventKind::kResumed, key) &&
           resumed.Has(EventKind::kBreakerOpened, other);
  }));
  // Nothing twice, nothing missed: per replica, the old watcher's last
  // event and the new one's first are neighbours.
  for (int i = 0; i < kReplicas; ++i) {
    std::vector<WatchEvent> joined;
    for (const WatchEvent& e : before) {
      if (e.replica == Name(i)) joined.push_back(e);
    }
    for (const WatchEvent& e : resumed.Of(Name(i))) joined.push_back(e);
    // Deduplication leaves out other replicas' copies: compare with the
    // watcher that kept every copy.
    std::set<uint64_t> got;
    for (const WatchEvent& e : joined) {
      EXPECT_TRUE(got.insert(e.sequence).second)
          << Name(i) << " #" << e.sequence << " delivered twice";
    }
    for (const WatchEvent& e : all.Of(Name(i))) {
      const bool operator_copy = !e.operation_id.empty();
      if (!operator_copy) {
        EXPECT_TRUE(got.count(e.sequence))
            << Name(i) << " #" << e.sequence << " "
            << EventKindName(e.kind) << " missed across the reconnection";
      }
    }
  }

  // kill -9 of replica 0 and a restart on its port: its watcher is told;
  // the other replicas' events go on complete.
  servers_[0]->Kill();
  const std::string third = KeyOwnedBy(2, "https://third.example/hooks/");
  Trip(third);
  Restart(0);
  ASSERT_TRUE(PollUntil([&] {
    for (const WatchNotice& n : resumed.notices()) {
      if (n.kind == WatchNotice::Kind::kResync && n.member == Name(0)) {
        return n.detail == "RESTARTED";
      }
    }
    return false;
  })) << "replica 0's watcher was not told it restarted";
  ASSERT_TRUE(PollUntil([&] { return resumed.Has(EventKind::kBreakerOpened, third); }));
  for (int i : {1, 2}) ExpectContiguous(all.Of(Name(i)), Name(i));
  again->Stop();
  keep_all->Stop();
}

TEST_F(WatchE2eTest, DisableByHandAndAutomaticallyAndAcrossARestart) {
  Seen seen;
  auto watcher = Watch(&seen);
  ASSERT_NE(watcher, nullptr);
  // By hand, ahead of traffic, on every replica.
  const std::string hand = KeyOwnedBy(2, "https://gone.example/hooks/");
  OnEveryReplica("disable", hand, "op-hand");
  const client::ClientDecision d = Admit(hand);
  EXPECT_EQ(d.verdict, engine::Verdict::kGiveUp);
  EXPECT_EQ(d.reason, engine::Reason::kEndpointDisabled);

  // Automatic, by three permanent failures (410 Gone) in a minute.
  const std::string gone = KeyOwnedBy(1, "https://410.example/hooks/");
  for (int i = 0; i < 3; ++i) Report(gone, Outcome::kNotRetryable);
  EXPECT_EQ(Admit(gone).reason, engine::Reason::kEndpointDisabled);
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kDisabled, gone); }));

  // Automatic, by a breaker away from CLOSED for 2 s, with no traffic: the
  // replica's refresher finds it.
  const std::string dead = KeyOwnedBy(0, "e2e/unavailable/");
  Trip(dead);
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kDisabled, dead); },
                        absl::Seconds(40)));
  for (const WatchEvent& e : seen.events()) {
    if (e.kind != EventKind::kDisabled) continue;
    if (e.endpoint == gone) {
      EXPECT_EQ(e.disable_trigger, "PERMANENT_FAILURES");
    }
    if (e.endpoint == dead) {
      EXPECT_EQ(e.disable_trigger, "UNAVAILABLE");
    }
  }
  EXPECT_EQ(Admit(dead).reason, engine::Reason::kEndpointDisabled);

  // A drain and a restart keep every disable (the state file).
  const int owner = 1;
  ASSERT_TRUE(servers_[owner]->Terminate(stagger::testing::kExitTimeout).ok());
  Restart(owner);
  client_->WaitForCoordinator(absl::Seconds(10));
  ASSERT_TRUE(PollUntil([&] {
    auto a = client_->Admit(AdmitOf(gone, 1));
    return a.ok() && a->source == client::DecisionSource::kCoordinator &&
           a->reason == engine::Reason::kEndpointDisabled;
  })) << "the disable was lost in the restart";

  // Enabled by hand: the endpoint is decided as before.
  OnEveryReplica("enable", hand, "op-enable");
  EXPECT_EQ(Admit(hand).verdict, engine::Verdict::kProceed);
  ASSERT_TRUE(PollUntil([&] { return seen.Has(EventKind::kEnabled, hand); }));
  watcher->Stop();
}

}  // namespace
}  // namespace stagger::e2e
