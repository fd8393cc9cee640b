// Soak: the real staggerd under mixed load for a configurable time
// (STAGGER_SOAK_SECONDS, default 60; docs/SOAK.md has the long runs):
//   - 4 threads of raw RPCs (generated stubs, so any error is seen as such,
//     not hidden by the client's fallback): Admit, Report (success,
//     failures, 429 with Retry-After), AdmitBatch and ReportBatch of 1..50
//     items;
//   - endpoint churn: keys come from a window that moves every second, so
//     the number of distinct endpoints grows far past limits.max_endpoints
//     (2000) and the table lives on eviction (full-table sweeps and the
//     1 s idle eviction);
//   - the config file rewritten (atomically, by rename) every 3 s,
//     alternating two policies and two max_endpoints (2000 / 1500), picked
//     up by the reloader (--config_poll_interval=200ms).
// Asserts: no RPC error; staggerd alive throughout and exits 0 on SIGTERM;
// resident memory flat after warm-up: the peak RSS over the last third of
// the run is at most the peak over the third after warm-up (first third)
// + 10% + 8 MiB. Prints the RSS figures and call counts.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/support/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::fault {
namespace {

using testing::StaggerdProcess;

constexpr int kThreads = 4;

absl::Duration SoakDuration() {
  const char* s = std::getenv("STAGGER_SOAK_SECONDS");
  int seconds = 60;
  if (s != nullptr && *s != '\0') {
    EXPECT_TRUE(absl::SimpleAtoi(s, &seconds) && seconds >= 15)
        << "STAGGER_SOAK_SECONDS: whole seconds >= 15, got '" << s << "'";
  }
  return absl::Seconds(std::max(seconds, 15));
}

std::string Config(int generation) {
  const bool odd = generation % 2 == 1;
  return absl::StrCat(
      "# soak generation ", generation, "\n",
      "default_policy {\n",
      "  backoff { cap { seconds: ", odd ? 10 : 30, " } }\n",
      "  breaker { consecutive_failures: ", odd ? 5 : 20, " }\n",
      "}\n",
      "overrides { prefix: \"soak/b\" policy { backoff { kind: ",
      odd ? "EXPONENTIAL" : "FULL_JITTER", " } } }\n",
      "limits {\n",
      "  max_endpoints: ", odd ? 1500 : 2000, "\n",
      "  idle_eviction { seconds: 1 }\n",
      "}\n");
}

// VmRSS of `pid`, bytes; 0 if unreadable.
int64_t RssBytes(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    int64_t kb = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(
                             absl::StripSuffix(line.substr(6), "kB")),
                         &kb)) {
      return kb * 1024;
    }
  }
  return 0;
}

// ListEndpoints' total_tracked; -1 on error.
int64_t TotalTracked(const std::string& target) {
  auto stub = v1::RetryCoordinator::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::ListEndpointsRequest req;
  req.set_page_size(1);
  v1::ListEndpointsResponse resp;
  return stub->ListEndpoints(&ctx, req, &resp).ok() ? resp.total_tracked() : -1;
}

class Soaker {
 public:
  Soaker(std::shared_ptr<grpc::Channel> channel, absl::Time start)
      : stub_(v1::RetryCoordinator::NewStub(channel)), start_(start) {}

  void Run(int thread, const std::atomic<bool>& stop) {
    std::mt19937_64 rng(thread + 1);
    while (!stop.load()) {
      const int kind = static_cast<int>(rng() % 10);
      grpc::Status s;
      if (kind < 4) {
        s = Admit(Key(rng));
      } else if (kind < 8) {
        s = Report(Key(rng), rng);
      } else if (kind == 8) {
        s = AdmitBatch(rng);
      } else {
        s = ReportBatch(rng);
      }
      absl::MutexLock l(&mu_);
      ++calls_;
      if (!s.ok()) {
        ++errors_;
        if (first_error_.empty()) {
          first_error_ = absl::StrCat(s.error_code(), ": ", s.error_message());
        }
      }
    }
  }
  int64_t calls() const { absl::MutexLock l(&mu_); return calls_; }
  int64_t errors() const { absl::MutexLock l(&mu_); return errors_; }
  std::string first_error() const { absl::MutexLock l(&mu_); return first_error_; }

 private:
  // The window of keys moves by 1000 every second: ~1000 new endpoints/s.
  std::string Key(std::mt19937_64& rng) {
    const int64_t second = absl::ToInt64Seconds(absl::Now() - start_);
    const int64_t n = second * 1000 + static_cast<int64_t>(rng() % 3000);
    return absl::StrCat(n % 2 ? "soak/a/" : "soak/b/", n);
  }
  // 10 s on the monotonic clock: a step of the wall clock (seen once: a
  // clean-clone run where it jumped >= 10 s forward mid-soak) must not
  // expire a call whose deadline was read just before the step.
  static void Deadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_seconds(10, GPR_TIMESPAN)));
  }
  static void FillAdmit(const std::string& key, v1::AdmitRequest* r) {
    r->set_endpoint(key);
    r->set_attempt(1);
  }
  static void FillReport(const std::string& key, std::mt19937_64& rng,
                         v1::ReportRequest* r) {
    r->set_endpoint(key);
    r->set_attempt(1 + static_cast<int>(rng() % 4));
    static constexpr v1::Outcome kOutcomes[] = {
        v1::SUCCESS, v1::SUCCESS, v1::RETRYABLE_FAILURE, v1::TIMEOUT,
        v1::RATE_LIMITED, v1::PERMANENT_FAILURE};
    r->set_outcome(kOutcomes[rng() % 6]);
    if (r->outcome() == v1::RATE_LIMITED) {
      r->mutable_retry_after()->set_seconds(static_cast<int64_t>(rng() % 60));
    }
  }
  grpc::Status Admit(const std::string& key) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::AdmitRequest req;
    FillAdmit(key, &req);
    v1::AdmitResponse resp;
    return stub_->Admit(&ctx, req, &resp);
  }
  grpc::Status Report(const std::string& key, std::mt19937_64& rng) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ReportRequest req;
    FillReport(key, rng, &req);
    v1::ReportResponse resp;
    return stub_->Report(&ctx, req, &resp);
  }
  grpc::Status AdmitBatch(std::mt19937_64& rng) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::AdmitBatchRequest req;
    const int n = 1 + static_cast<int>(rng() % 50);
    for (int i = 0; i < n; ++i) FillAdmit(Key(rng), req.add_items());
    v1::AdmitBatchResponse resp;
    grpc::Status s = stub_->AdmitBatch(&ctx, req, &resp);
    if (s.ok() && resp.decisions_size() != n) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "batch answer size");
    }
    return s;
  }
  grpc::Status ReportBatch(std::mt19937_64& rng) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ReportBatchRequest req;
    const int n = 1 + static_cast<int>(rng() % 50);
    for (int i = 0; i < n; ++i) FillReport(Key(rng), rng, req.add_items());
    v1::ReportBatchResponse resp;
    grpc::Status s = stub_->ReportBatch(&ctx, req, &resp);
    if (s.ok() && resp.decisions_size() != n) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "batch answer size");
    }
    return s;
  }

  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

TEST(SoakTest, MixedLoadReloadsAndChurnStayFlat) {
  const absl::Duration duration = SoakDuration();
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string config = dir / "config.textproto";
  int generation = 0;
  ASSERT_TRUE(testing::ReplaceFile(config, Config(generation)));
  auto server = StaggerdProcess::Start(
      STAGGERD_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=",
       "--config=" + config, "--config_poll_interval=200ms"},
      absl::Seconds(30));
  ASSERT_TRUE(server.ok()) << server.status();
  const pid_t pid = (*server)->pid();

  const absl::Time start = absl::Now();
  Soaker soaker(grpc::CreateChannel((*server)->target(),
                                    grpc::InsecureChannelCredentials()),
                start);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { soaker.Run(t, stop); });
  }

  // Once a second: sample RSS; every 3 s: a new config. The run is cut
  // into thirds: warm-up, reference, final.
  std::vector<std::pair<absl::Duration, int64_t>> rss;
  absl::Time next_reload = start + absl::Seconds(3);
  while (absl::Now() - start < duration && !(*server)->exited()) {
    absl::SleepFor(absl::Seconds(1));
    rss.emplace_back(absl::Now() - start, RssBytes(pid));
    if (absl::Now() >= next_reload) {
      ASSERT_TRUE(testing::ReplaceFile(config, Config(++generation)));
      next_reload += absl::Seconds(3);
    }
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  ASSERT_FALSE((*server)->exited()) << "staggerd died:\n" << (*server)->output();
  // The table stayed within max_endpoints (2000 or 1500: a lower limit
  // from a reload is reached by eviction, so 2000 bounds both) though
  // ~1000 new endpoints came every second.
  const int64_t tracked = TotalTracked((*server)->target());
  EXPECT_GE(tracked, 1);
  EXPECT_LE(tracked, 2000);
  const size_t reloads_seen = [&] {
    size_t n = 0, at = 0;
    const std::string out = (*server)->output();
    while ((at = out.find("config reloaded", at)) != std::string::npos) ++n, ++at;
    return n;
  }();
  absl::StatusOr<int> code = (*server)->Terminate();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);

  int64_t reference = 0, final_peak = 0;
  for (const auto& [at, bytes] : rss) {
    if (at >= duration / 3 && at < 2 * duration / 3) {
      reference = std::max(reference, bytes);
    } else if (at >= 2 * duration / 3) {
      final_peak = std::max(final_peak, bytes);
    }
  }
  const int64_t tolerance = reference / 10 + (int64_t{8} << 20);
  std::fprintf(stderr,
               "soak %s: %lld calls, %lld errors, %d config writes (%zu "
               "reloads logged); RSS peak %.1f MiB in the middle third, "
               "%.1f MiB in the last (allowed %.1f MiB); first sample "
               "%.1f MiB; %lld endpoints tracked at the end\n",
               absl::FormatDuration(duration).c_str(),
               static_cast<long long>(soaker.calls()),
               static_cast<long long>(soaker.errors()), generation,
               reloads_seen, reference / 1048576.0, final_peak / 1048576.0,
               (reference + tolerance) / 1048576.0,
               rss.empty() ? 0.0 : rss.front().second / 1048576.0,
               static_cast<long long>(tracked));
  EXPECT_EQ(soaker.errors(), 0) << soaker.first_error();
  EXPECT_GT(soaker.calls(), 1000);
  EXPECT_GT(generation, 3);
  EXPECT_GE(static_cast<int>(reloads_seen), generation - 1);
  ASSERT_GT(reference, 0) << "no RSS samples";
  EXPECT_LE(final_peak, reference + tolerance);
}

}  // namespace
}  // namespace stagger::fault
