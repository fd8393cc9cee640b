// WaitRoom (server/service/wait_room.h) behind the real CoordinatorService,
// over loopback: waiting Admits held as pending calls, released by the
// breaker's gates, answered at their expiry, on cancel and at shutdown;
// the room's limit. A fake clock moves the endpoint's time; a test that
// moves it calls Wake, as a report or an operator's action would. Calls
// are started one at a time (the harness's random source is
// single-threaded), each waited for until the room holds it.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/rpc/raw_unary.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/service/service_harness.h"

namespace stagger::testing {
namespace {

constexpr char kEp[] = "https://down.example/hook";

ServiceHarness::Options RoomOptions(size_t max_waiting) {
  ServiceHarness::Options o;
  o.max_waiting = max_waiting;
  SetOneProbeBreaker(o.config);
  return o;
}

// Polls (real time, 10 ms steps) until `done`; false after 30 s.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// One waiting Admit on its own thread; its answer once it has one.
class WaitingAdmit {
 public:
  WaitingAdmit(ServiceHarness& h, int attempt, absl::Duration wait) {
    v1::AdmitRequest req;
    req.set_endpoint(kEp);
    req.set_attempt(attempt);
    req.mutable_wait()->set_seconds(absl::ToInt64Seconds(wait));
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoSeconds(wait + absl::Seconds(1)));
    thread_ = std::thread([this, &h, req] {
      v1::AdmitResponse resp;
      grpc::Status s = h.stub().Admit(&ctx_, req, &resp);
      absl::MutexLock l(&mu_);
      status_ = s;
      decision_ = resp.decision();
      done_ = true;
    });
  }
  ~WaitingAdmit() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  void Cancel() { ctx_.TryCancel(); }
  bool done() {
    absl::MutexLock l(&mu_);
    return done_;
  }
  grpc::Status status() {
    Join();
    return status_;
  }
  v1::Decision decision() {
    Join();
    return decision_;
  }

 private:
  grpc::ClientContext ctx_;
  std::thread thread_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_;
  v1::Decision decision_;
};

class WaitRoomTest : public ::testing::Test {
 protected:
  void Start(size_t max_waiting) {
    h_ = std::make_unique<ServiceHarness>(RoomOptions(max_waiting));
  }
  service::WaitRoom& room() { return *h_->room(); }
  // Whatever a test left held is answered before the calls are joined.
  void TearDown() override {
    if (h_ != nullptr) room().Shutdown();
    calls_.clear();
  }

  // Three failures: the breaker opens for 10 s (fake time).
  void Trip() {
    for (int i = 0; i < 3; ++i) {
      v1::ReportRequest r;
      r.set_endpoint(kEp);
      r.set_attempt(1);
      r.set_outcome(v1::RETRYABLE_FAILURE);
      v1::ReportResponse resp;
      ASSERT_TRUE(h_->Report(r, &resp).ok());
    }
  }
  // A waiting Admit of a parked delivery's attempt 2, started once the
  // previous ones are held, and itself held before this returns.
  WaitingAdmit* Park(absl::Duration wait = absl::Seconds(60)) {
    const int64_t before = room().waiting();
    calls_.push_back(std::make_unique<WaitingAdmit>(*h_, 2, wait));
    EXPECT_TRUE(Eventually([&] { return room().waiting() == before + 1; }));
    return calls_.back().get();
  }
  int Answered() {
    int n = 0;
    for (auto& c : calls_) n += c->done();
    return n;
  }

  std::unique_ptr<ServiceHarness> h_;
  std::vector<std::unique_ptr<WaitingAdmit>> calls_;
};

TEST_F(WaitRoomTest, ACallToAnOpenBreakerIsHeldNotAnswered) {
  Start(10);
  Trip();
  WaitingAdmit* a = Park();
  EXPECT_EQ(room().waiting(), 1);
  EXPECT_FALSE(a->done());
}

TEST_F(WaitRoomTest, WhenTheBreakerHalfOpensTheFirstHeldCallIsTheProbe) {
  Start(10);
  Trip();
  WaitingAdmit* first = Park();
  Park();
  Park();
  // The open period ends; a look at the line hands out the one probe.
  h_->clock().Advance(absl::Seconds(11));
  room().Wake(kEp);
  ASSERT_TRUE(Eventually([&] { return Answered() == 1; }));
  ASSERT_TRUE(first->done());
  EXPECT_EQ(first->decision().verdict(), v1::PROCEED);
  EXPECT_EQ(first->decision().reason(), v1::HALF_OPEN_PROBE);
  EXPECT_TRUE(first->decision().wait_supported());
  EXPECT_EQ(room().waiting(), 2);

  // The probe succeeds: the breaker closes and the others are released
  // at the endpoint's pace (the fake clock moves them through it).
  v1::ReportRequest ok;
  ok.set_endpoint(kEp);
  ok.set_attempt(2);
  ok.set_outcome(v1::SUCCESS);
  ok.set_admission(first->decision().admission());
  v1::ReportResponse resp;
  ASSERT_TRUE(h_->Report(ok, &resp).ok());
  for (int i = 0; i < 50 && room().waiting() > 0; ++i) {
    h_->clock().Advance(absl::Milliseconds(200));
    room().Wake(kEp);
    absl::SleepFor(absl::Milliseconds(20));  // the look runs meanwhile
  }
  ASSERT_TRUE(Eventually([&] { return Answered() == 3; }));
  for (size_t i = 1; i < calls_.size(); ++i) {
    EXPECT_TRUE(calls_[i]->status().ok());
    EXPECT_EQ(calls_[i]->decision().verdict(), v1::PROCEED) << i;
    EXPECT_EQ(calls_[i]->decision().reason(), v1::RELEASED) << i;
  }
}

TEST_F(WaitRoomTest, AtItsExpiryACallIsAnsweredAsAnAdmitThen) {
  Start(10);
  Trip();
  WaitingAdmit* a = Park(absl::Seconds(5));
  // Its wait (5 s) runs out before the open period (10 s) does.
  h_->clock().Advance(absl::Seconds(6));
  room().Wake(kEp);
  ASSERT_TRUE(Eventually([&] { return a->done(); }));
  EXPECT_TRUE(a->status().ok());
  EXPECT_EQ(a->decision().verdict(), v1::DEFER);
  EXPECT_EQ(a->decision().reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(room().waiting(), 0);
}

TEST_F(WaitRoomTest, ShutdownAnswersEveryHeldCallAndHoldsNoMore) {
  Start(10);
  Trip();
  Park();
  Park();
  Park();
  room().Shutdown();
  EXPECT_EQ(room().waiting(), 0);
  for (auto& c : calls_) {
    ASSERT_TRUE(c->status().ok()) << c->status().error_message();
    EXPECT_EQ(c->decision().verdict(), v1::DEFER);
    EXPECT_EQ(c->decision().reason(), v1::CIRCUIT_OPEN);
  }
  // A waiting Admit now is answered at once, and is no overflow.
  WaitingAdmit late(*h_, 2, absl::Seconds(60));
  ASSERT_TRUE(late.status().ok());
  EXPECT_EQ(late.decision().reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(room().overflows(), 0);
}

TEST_F(WaitRoomTest, BeyondItsLimitACallIsAnsweredAtOnceAndCounted) {
  Start(2);
  Trip();
  Park();
  Park();
  WaitingAdmit third(*h_, 2, absl::Seconds(60));
  ASSERT_TRUE(third.status().ok());
  EXPECT_EQ(third.decision().verdict(), v1::DEFER);
  EXPECT_EQ(third.decision().reason(), v1::CIRCUIT_OPEN);
  EXPECT_TRUE(third.decision().wait_supported());
  EXPECT_EQ(room().waiting(), 2);
  EXPECT_EQ(room().overflows(), 1);
}

TEST_F(WaitRoomTest, ACancelledCallLeavesTheLine) {
  Start(10);
  Trip();
  WaitingAdmit* a = Park();
  a->Cancel();
  EXPECT_EQ(a->status().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return room().waiting() == 0; }));
}

// The hottest path parses each Admit once: the same parse tells whether it
// waits and answers it, held or not (core/rpc/raw_unary.h's observer counts
// parses). Bytes that are no AdmitRequest are still refused naming the type.
std::atomic<int> admit_parses{0};
void CountAdmitParses(absl::string_view type) {
  if (type == "stagger.v1.AdmitRequest") admit_parses.fetch_add(1);
}

TEST_F(WaitRoomTest, EveryAdmitIsParsedOnceHeldOrNot) {
  Start(10);
  rpc::parse_observer.store(&CountAdmitParses);
  v1::AdmitRequest plain;
  plain.set_endpoint(kEp);
  plain.set_attempt(1);
  v1::AdmitResponse resp;
  ASSERT_TRUE(h_->Admit(plain, &resp).ok());
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a plain Admit";
  {
    WaitingAdmit now(*h_, 1, absl::Seconds(5));  // a first attempt goes now
    ASSERT_TRUE(now.status().ok());
  }
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a waiting Admit answered now";
  Trip();
  WaitingAdmit* held = Park();
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a waiting Admit held";
  EXPECT_FALSE(held->done());

  grpc::GenericStub stub(h_->channel());
  grpc::Slice slice(std::string("\x08\xff\xff\xff"));
  grpc::ByteBuffer req(&slice, 1);
  grpc::ByteBuffer out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/stagger.v1.RetryCoordinator/Admit",
                 grpc::StubOptions(), &req, &out, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  rpc::parse_observer.store(nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "request: 4 bytes that are not a valid stagger.v1.AdmitRequest "
            "(malformed protobuf, or a string field that is not UTF-8)");
  EXPECT_EQ(admit_parses.exchange(0), 1);
}

}  // namespace
}  // namespace stagger::testing
