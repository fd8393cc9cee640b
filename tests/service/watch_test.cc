// The watch below staggerd, on a fake clock: the change log's numbering,
// bounds, filters and tokens; the feed's events for an endpoint's story
// (a trip, half-open by time, a Retry-After window and its end, a pause
// and its running out, a disable and an enable), with the refresher
// finding what time alone changes; and the EndpointWatch service over a
// real loopback gRPC server: history, resume tokens that miss nothing,
// a token from another incarnation or past the history told as a
// resync, filters, and refusals naming the field.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/daemon/condition_fan_out.h"
#include "server/service/admin_service.h"
#include "server/service/condition_refresher.h"
#include "server/service/server_setup.h"
#include "server/service/watch_feed.h"
#include "server/service/watch_log.h"
#include "server/service/watch_service.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "stagger/v1/watch.grpc.pb.h"
#include "tests/testing/engine_calls.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://tenant.example/hooks";

v1::WatchEvent Ev(v1::EventKind kind, const std::string& endpoint) {
  v1::WatchEvent e;
  e.set_kind(kind);
  e.set_endpoint(endpoint);
  return e;
}

std::vector<uint64_t> Sequences(const std::vector<v1::WatchEvent>& events) {
  std::vector<uint64_t> out;
  for (const auto& e : events) out.push_back(e.sequence());
  return out;
}

std::vector<v1::EventKind> Kinds(const std::vector<v1::WatchEvent>& events) {
  std::vector<v1::EventKind> out;
  for (const auto& e : events) out.push_back(e.kind());
  return out;
}

// --- The log ---------------------------------------------------------------

TEST(WatchLogTest, NumbersContiguouslyAndKeepsACountAndAnAgeAtMost) {
  FakeClock clock;
  WatchLog log({"stagger-0", 7, /*max_events=*/100, absl::Minutes(10)},
               &clock);
  for (int i = 0; i < 150; ++i) {
    EXPECT_EQ(log.Append(Ev(v1::EVENT_BREAKER_OPENED, "a")), i + 1u);
  }
  EXPECT_EQ(log.size(), 100u);
  EXPECT_EQ(log.oldest(), 51u);
  EXPECT_EQ(log.next_sequence(), 151u);
  WatchLog::Page p = log.Read(40, {}, 5);
  EXPECT_EQ(p.missed_from, 40u);
  EXPECT_EQ(p.missed_to, 50u);
  EXPECT_EQ(Sequences(p.events), (std::vector<uint64_t>{51, 52, 53, 54, 55}));
  EXPECT_EQ(p.next, 56u);
  EXPECT_EQ(p.events[0].replica(), "stagger-0");
  EXPECT_EQ(p.events[0].incarnation(), 7u);
  // By age: ten minutes on, the old events are gone even below the count.
  clock.Advance(absl::Minutes(9));
  log.Append(Ev(v1::EVENT_BREAKER_CLOSED, "a"));
  clock.Advance(absl::Minutes(2));
  p = log.Read(1, {}, 1000);
  EXPECT_EQ(Sequences(p.events), (std::vector<uint64_t>{151}));
  EXPECT_EQ(p.missed_to, 150u);
}

TEST(WatchLogTest, FiltersByPrefixAndKindAndSkipsWhatTheyLeaveOut) {
  FakeClock clock;
  WatchLog log({"r", 1}, &clock);
  log.Append(Ev(v1::EVENT_BREAKER_OPENED, "https://a.example/x"));
  log.Append(Ev(v1::EVENT_BREAKER_OPENED, "https://b.example/x"));
  v1::WatchEvent prefix_pause = Ev(v1::EVENT_PAUSED, "");
  prefix_pause.mutable_pause()->mutable_target()->set_prefix("https://");
  log.Append(prefix_pause);
  log.Append(Ev(v1::EVENT_DISABLED, "https://a.example/y"));
  WatchLog::Filter f;
  f.prefix = "https://a.example/";
  WatchLog::Page p = log.Read(1, f, 100);
  EXPECT_EQ(Sequences(p.events), (std::vector<uint64_t>{1, 3, 4}))
      << "a prefix pause covering the watched keys is theirs";
  f.kinds = 1u << v1::EVENT_DISABLED;
  p = log.Read(1, f, 100);
  EXPECT_EQ(Sequences(p.events), (std::vector<uint64_t>{4}));
  EXPECT_EQ(p.next, 5u) << "examined past the filtered-out ones";
}

TEST(WatchLogTest, TokensRoundTripAndOthersAreRefusedNamingTheField) {
  FakeClock clock;
  WatchLog log({"r", 0xabcdef}, &clock);
  absl::StatusOr<WatchLog::Position> pos =
      WatchLog::ParseToken(log.TokenFor(42));
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(pos->incarnation, 0xabcdefu);
  EXPECT_EQ(pos->next, 42u);
  for (const char* bad : {"", "x", "0000000000abcdef", "0000000000abcdef.",
                          "0000000000abcdef.0", "zz00000000abcdef.3",
                          "0000000000abcdef.3.4"}) {
    absl::StatusOr<WatchLog::Position> p = WatchLog::ParseToken(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("resume_token"), std::string::npos);
  }
  EXPECT_FALSE(WatchLog::CheckOptions({"r", 0, 10, absl::Hours(1)}).ok());
  EXPECT_FALSE(WatchLog::CheckOptions({"r", 0, 1000, absl::Seconds(1)}).ok());
}

// --- The feed, the refresher and the services ---------------------------

// An engine on a fake clock whose changes and pauses reach a log, as
// staggerd wires them (server/daemon/endpoint_watch.h), and the
// EndpointWatch and Admin services on a loopback port.
class WatchRig {
 public:
  WatchRig() : random_(3), engine_(Config(), &clock_, &random_),
               log_({"stagger-0", 0, 1000, absl::Hours(1)}, &clock_),
               feed_(&log_),
               refresher_(&engine_, &clock_, [this](const engine::Pause& p) {
                 feed_.OnPauseRanOut(p);
               }) {
    fan_out_.Add(&feed_);
    fan_out_.Add(&refresher_);
    engine_.set_condition_sink(&fan_out_);
    engine_.pauses().set_listener(
        [this](const engine::Pause& p, bool removed) {
          feed_.OnPause(p, removed);
          refresher_.OnPause(p, removed);
        });
    watch_ = std::make_unique<WatchService>(&log_, nullptr);
    admin_ = std::make_unique<AdminService>(&engine_, nullptr, &clock_,
                                            nullptr);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(watch_.get());
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
  }
  ~WatchRig() {
    watch_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }

  static engine::EngineConfig Config() {
    engine::EngineConfig c;
    auto& b = c.default_policy.breaker;
    b.consecutive_failures = 3;
    b.min_throughput = 1000000000;
    b.open_base = absl::Seconds(10);
    b.open_max = absl::Seconds(10);
    b.half_open_probes = 1;
    b.close_after_successes = 1;
    return c;
  }

  // The story: a trip, half-open by time, a 429 with Retry-After whose
  // window ends, a pause that runs out, a disable and an enable.
  void Story() {
    for (int i = 0; i < 3; ++i) {
      ::stagger::testing::ReportOk(engine_, kEp, 1,
                                   engine::Outcome::kRetryableFailure);
    }
    clock_.Advance(absl::Seconds(13));
    refresher_.RunOnce();  // OPEN reads HALF_OPEN
    ::stagger::testing::ReportOk(engine_, kEp, 1, engine::Outcome::kRateLimited,
                                 absl::Seconds(30));
    clock_.Advance(absl::Seconds(31));
    refresher_.RunOnce();  // the window ended
    Admin("pause");
    clock_.Advance(absl::Minutes(2));
    refresher_.RunOnce();  // the pause ran out
    Admin("disable");
    Admin("enable");
  }

  void Admin(const std::string& what) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stub = v1::Admin::NewStub(channel_);
    grpc::Status s;
    if (what == "pause") {
      v1::PauseRequest req;
      req.mutable_target()->set_endpoint(kEp);
      req.mutable_duration()->set_seconds(60);
      req.set_reason("partner maintenance");
      req.set_operation_id("op-pause");
      v1::PauseResponse resp;
      s = stub->Pause(&ctx, req, &resp);
    } else if (what == "disable") {
      v1::DisableRequest req;
      req.set_endpoint(kEp);
      req.set_reason("tenant deleted it");
      req.set_operation_id("op-disable");
      v1::DisableResponse resp;
      s = stub->Disable(&ctx, req, &resp);
    } else {
      v1::EnableRequest req;
      req.set_endpoint(kEp);
      req.set_operation_id("op-enable");
      v1::EnableResponse resp;
      s = stub->Enable(&ctx, req, &resp);
    }
    EXPECT_TRUE(s.ok()) << what << ": " << s.error_message();
  }

  // One Watch call's messages until `events` events came (or the stream
  // ended); its status if it ended.
  struct Seen {
    std::vector<v1::WatchResponse> messages;
    std::vector<v1::WatchEvent> events;
    grpc::Status status;
  };
  Seen Watch(const v1::WatchRequest& req, size_t events) {
    Seen out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stub = v1::EndpointWatch::NewStub(channel_);
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub->Watch(&ctx, req);
    v1::WatchResponse m;
    while (out.events.size() < events && reader->Read(&m)) {
      out.messages.push_back(m);
      for (const auto& e : m.events()) out.events.push_back(e);
    }
    if (out.events.size() >= events) {
      ctx.TryCancel();
      while (reader->Read(&m)) {
      }
    }
    out.status = reader->Finish();
    return out;
  }

  FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  WatchLog log_;
  WatchFeed feed_;
  ConditionRefresher refresher_;
  daemon::ConditionFanOut fan_out_;
  std::unique_ptr<WatchService> watch_;
  std::unique_ptr<AdminService> admin_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST(WatchFeedTest, AnEndpointsStoryIsToldInOrderWithItsDetails) {
  WatchRig rig;
  rig.Story();
  const WatchLog::Page p = rig.log_.Read(1, {}, 100);
  // The trip's deferral parks a delivery: its release runs until the
  // parked delivery has come back (the engine's `releasing`).
  EXPECT_EQ(Kinds(p.events),
            (std::vector<v1::EventKind>{
                v1::EVENT_BREAKER_OPENED, v1::EVENT_RELEASE_STARTED,
                v1::EVENT_BREAKER_HALF_OPEN, v1::EVENT_RELEASE_FINISHED,
                v1::EVENT_RETRY_AFTER_SET, v1::EVENT_RETRY_AFTER_ENDED,
                v1::EVENT_PAUSED, v1::EVENT_RESUMED, v1::EVENT_DISABLED,
                v1::EVENT_ENABLED}));
  EXPECT_EQ(Sequences(p.events),
            (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  ASSERT_EQ(p.events.size(), 10u);
  const auto& e = p.events;
  EXPECT_EQ(e[0].open_cause(), v1::OPEN_CAUSE_CONSECUTIVE_FAILURES);
  EXPECT_TRUE(e[0].has_open_until());
  EXPECT_GT(e[1].release_pace(), 0);
  EXPECT_GT(e[3].release_pace(), 0) << "the pace it finished at";
  EXPECT_TRUE(e[4].has_retry_after_until());
  EXPECT_EQ(e[6].pause().reason(), "partner maintenance");
  EXPECT_EQ(e[6].pause().pause_id(), "op-pause");
  EXPECT_EQ(e[6].operation_id(), "op-pause");
  EXPECT_EQ(e[6].by(), "unauthenticated");
  EXPECT_TRUE(e[7].ran_out());
  EXPECT_EQ(e[7].operation_id(), "op-pause") << "a pause's end: its id";
  EXPECT_EQ(e[8].disabled().trigger(), v1::DISABLE_TRIGGER_OPERATOR);
  EXPECT_EQ(e[8].disabled().reason(), "tenant deleted it");
  EXPECT_EQ(e[8].operation_id(), "op-disable");
  EXPECT_EQ(e[9].operation_id(), "op-enable");
  for (const auto& ev : e) EXPECT_EQ(ev.endpoint(), kEp);
}

TEST(WatchFeedTest, TheRefresherLooksOnlyAtWhatTimeCanChange) {
  WatchRig rig;
  for (int i = 0; i < 3; ++i) {
    ::stagger::testing::ReportOk(rig.engine_, kEp, 1,
                                 engine::Outcome::kRetryableFailure);
  }
  EXPECT_EQ(rig.refresher_.endpoints(), 1u);
  EXPECT_EQ(rig.refresher_.RunOnce(), 0) << "not due before open_until";
  rig.clock_.Advance(absl::Seconds(13));
  EXPECT_EQ(rig.refresher_.RunOnce(), 1);
  EXPECT_EQ(rig.refresher_.RunOnce(), 0) << "half-open: looked at again later";
  // A disabled endpoint with nothing else to wait for is not looked at.
  engine::Disable d;
  d.reason = "gone";
  ASSERT_TRUE(rig.engine_.Disable("https://other.example/", d).ok());
  EXPECT_EQ(rig.refresher_.endpoints(), 1u);
}

TEST(WatchServiceTest, HistoryThenTokensThatMissNothing) {
  WatchRig rig;
  rig.Story();
  v1::WatchRequest req;
  req.set_replay_history(true);
  WatchRig::Seen all = rig.Watch(req, 10);
  ASSERT_EQ(all.events.size(), 10u);
  ASSERT_FALSE(all.messages.empty());
  EXPECT_EQ(all.messages[0].replica(), "stagger-0");
  EXPECT_EQ(all.messages[0].incarnation(), rig.log_.incarnation());
  EXPECT_FALSE(all.messages[0].has_resync());

  // Stop after the first message's events, resume with its token: the
  // rest, exactly.
  v1::WatchRequest from_now;
  WatchRig::Seen quiet = rig.Watch(from_now, 0);
  (void)quiet;
  v1::WatchRequest first;
  first.set_replay_history(true);
  first.add_kinds(v1::EVENT_BREAKER_OPENED);
  WatchRig::Seen one = rig.Watch(first, 1);
  ASSERT_EQ(one.events.size(), 1u);
  v1::WatchRequest resume;
  resume.set_resume_token(one.messages.back().resume_token());
  rig.Admin("disable");  // one more after the token
  WatchRig::Seen rest = rig.Watch(resume, 1);
  ASSERT_EQ(rest.events.size(), 1u);
  EXPECT_EQ(rest.events[0].kind(), v1::EVENT_DISABLED);
  EXPECT_EQ(rest.events[0].sequence(), 11u)
      << "the filtered first call examined everything up to its token";
  EXPECT_FALSE(rest.messages[0].has_resync());
}

TEST(WatchServiceTest, ARestartOrAGapIsToldNotSkipped) {
  WatchRig rig;
  rig.Story();
  v1::WatchRequest other;
  other.set_resume_token(WatchLog({"x", 99}, &rig.clock_).TokenFor(5));
  WatchRig::Seen restarted = rig.Watch(other, 10);
  ASSERT_FALSE(restarted.messages.empty());
  EXPECT_EQ(restarted.messages[0].resync().cause(), v1::Resync::RESTARTED);
  EXPECT_EQ(restarted.events.size(), 10u) << "from the new incarnation's start";

  // Push the first events out of the history (1000 at most).
  for (int i = 0; i < 1000; ++i) rig.log_.Append(Ev(v1::EVENT_BREAKER_CLOSED, "z"));
  v1::WatchRequest old;
  old.set_resume_token(rig.log_.TokenFor(3));
  WatchRig::Seen gap = rig.Watch(old, 1);
  ASSERT_FALSE(gap.messages.empty());
  EXPECT_EQ(gap.messages[0].resync().cause(), v1::Resync::EXPIRED);
  EXPECT_EQ(gap.messages[0].resync().missed_from(), 3u);
  EXPECT_EQ(gap.messages[0].resync().missed_to(), 10u);
  EXPECT_EQ(gap.events[0].sequence(), 11u);
}

TEST(WatchServiceTest, BadRequestsAreRefusedNamingTheField) {
  WatchRig rig;
  v1::WatchRequest bad_token;
  bad_token.set_resume_token("not-a-token");
  EXPECT_EQ(rig.Watch(bad_token, 1).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::WatchRequest bad_kind;
  bad_kind.add_kinds(static_cast<v1::EventKind>(99));
  const grpc::Status s = rig.Watch(bad_kind, 1).status;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "kinds[0]: unknown kind 99");
  v1::WatchRequest long_prefix;
  long_prefix.set_prefix(std::string(5000, 'p'));
  EXPECT_EQ(rig.Watch(long_prefix, 1).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(WatchServiceTest, AStreamWaitsForEventsAndEndsOnShutdown) {
  WatchRig rig;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stub = v1::EndpointWatch::NewStub(rig.channel_);
  auto reader = stub->Watch(&ctx, v1::WatchRequest());
  v1::WatchResponse m;
  ASSERT_TRUE(reader->Read(&m)) << "the first message comes at once";
  EXPECT_EQ(m.events_size(), 0);
  rig.Admin("disable");
  ASSERT_TRUE(reader->Read(&m));
  ASSERT_EQ(m.events_size(), 1);
  EXPECT_EQ(m.events(0).kind(), v1::EVENT_DISABLED);
  rig.watch_->Shutdown();
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace stagger::service
