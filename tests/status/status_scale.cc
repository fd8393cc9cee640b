// stagger_status_scale: how the status page's JSON endpoints behave with a
// big table, and what they cost the decision path meanwhile.
//
//   stagger_status_scale [ENDPOINTS [NOT_CLEAR_EVERY [REQUESTS [--check]]]]
//   defaults: 1000000 1000 5
//
// Tracks ENDPOINTS endpoints in an engine (the real clock), forces every
// NOT_CLEAR_EVERY-th breaker OPEN, then times StatusApi calls (the JSON
// exactly as served, minus the socket): the default page (not_clear, 100
// rows), a 1000-row not_clear page, a 1000-row filter=all page, walking
// every not_clear page, summary and decisions; and one Engine::List page
// of 1000, the cost of filtering pages from List instead. A thread keeps
// making Admit decisions throughout; their latency is reported with and
// without page requests running. Prints one line per measurement.
// --check (the ctest run, small sizes): exit 1 unless the counts are
// exact (scanned, matched, left_out, every not-clear key walked once).
// No timing is asserted anywhere. docs/STATUS_PAGE.md has the numbers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/status/decision_ring.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/status/peer_health.h"
#include "server/status/status_api.h"

namespace stagger::status {

using http::HttpResponse;

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string Key(int64_t i) { return absl::StrFormat("ep/%09d", i); }

// Admits on random known keys until `stop`, recording each call's time.
struct DecisionLoad {
  engine::Engine* engine;
  int64_t endpoints;
  std::atomic<bool> stop{false};
  std::atomic<bool> paging{false};
  std::vector<double> quiet_us, paging_us;  // owned by the thread
  void Run() {
    uint64_t x = 88172645463325252ull;
    while (!stop.load()) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      const std::string key = Key(static_cast<int64_t>(x % endpoints));
      engine::AdmitInput in;
      in.endpoint = key;
      const bool during = paging.load();
      const auto t = Clock::now();
      (void)engine->Admit(in);
      const double us = MsSince(t) * 1000;
      (during ? paging_us : quiet_us).push_back(us);
    }
  }
};

void PrintLatency(const char* what, std::vector<double> us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  std::printf("admit latency %-12s n=%zu p50=%.1fus p99=%.1fus p99.9=%.1fus max=%.1fus\n",
              what, us.size(), us[us.size() / 2], us[us.size() * 99 / 100],
              us[us.size() * 999 / 1000], us.back());
}

google::protobuf::Struct Doc(const HttpResponse& r) {
  google::protobuf::Struct s;
  (void)google::protobuf::util::JsonStringToMessage(r.body, &s);
  return s;
}

// Times `fn` `n` times; prints median and max.
template <typename Fn>
HttpResponse Time(const char* what, int n, Fn fn) {
  std::vector<double> ms;
  HttpResponse last;
  for (int i = 0; i < n; ++i) {
    const auto t = Clock::now();
    last = fn();
    ms.push_back(MsSince(t));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-34s median=%.1fms max=%.1fms bytes=%zu status=%d\n", what,
              ms[ms.size() / 2], ms.back(), last.body.size(), last.status);
  return last;
}

// Every not_clear page of 1000; the number of keys seen (each once).
int64_t WalkNotClear(const StatusApi& api, int64_t* pages) {
  std::string token;
  int64_t keys = 0;
  *pages = 0;
  do {
    const HttpResponse r = api.Endpoints(
        absl::StrCat("page_size=1000", token.empty() ? "" : "&page_token=", token));
    const google::protobuf::Struct s = Doc(r);
    keys += s.fields().at("endpoints").list_value().values_size();
    token = s.fields().at("next_page_token").string_value();
    ++*pages;
  } while (!token.empty());
  return keys;
}

// Tracks `endpoints` keys, every `every`-th with its breaker forced OPEN;
// returns how many are OPEN.
int64_t Fill(engine::Engine& engine, int64_t endpoints, int64_t every) {
  int64_t open = 0;
  for (int64_t i = 0; i < endpoints; ++i) {
    engine::AdmitInput in;
    const std::string key = Key(i);
    in.endpoint = key;
    (void)engine.Admit(in);
    if (i % every == 0) {
      open += engine.ForceBreaker(key, engine::BreakerState::kOpen,
                                  absl::Hours(1)).ok();
    }
  }
  return open;
}

bool Expect(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "stagger_status_scale: check failed: %s\n", what.c_str());
  return ok;
}

int Run(int64_t endpoints, int64_t every, int requests, bool check) {
  engine::EngineConfig config;
  config.limits.max_endpoints = std::max<int64_t>(endpoints, 1);
  engine::Engine engine(config, engine::RealClock::Instance(),
                        engine::PerThreadRandom::Instance());
  auto t = Clock::now();
  const int64_t open = Fill(engine, endpoints, every);
  std::printf("tracked %lld endpoints (%lld not clear) in %.0fms\n",
              static_cast<long long>(engine.Stats().tracked),
              static_cast<long long>(open), MsSince(t));

  PeerHealth peers({}, "", {});
  DecisionRing ring(engine::RealClock::Instance());
  StatusApi api(&engine, &peers, &ring, engine::RealClock::Instance());
  DecisionLoad load{&engine, std::max<int64_t>(endpoints, 1)};
  std::thread decisions([&load] { load.Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a baseline
  load.paging = true;
  const HttpResponse first = Time("GET api/endpoints (default)", requests,
                                  [&] { return api.Endpoints(""); });
  Time("GET api/endpoints?page_size=1000", requests,
       [&] { return api.Endpoints("page_size=1000"); });
  Time("GET api/endpoints?filter=all&...1000", requests,
       [&] { return api.Endpoints("filter=all&page_size=1000"); });
  Time("GET api/summary", requests, [&] { return api.Summary(""); });
  Time("GET api/decisions", requests, [&] { return api.Decisions(""); });
  t = Clock::now();
  engine::ListPage list = engine.List("", 1000, std::nullopt);
  std::printf("%-34s %.1fms (filtering pages from List: %lld such calls)\n",
              "Engine::List(page 1000)", MsSince(t),
              static_cast<long long>((endpoints + 999) / 1000));
  int64_t pages = 0;
  t = Clock::now();
  const int64_t walked = WalkNotClear(api, &pages);
  std::printf("walk every not_clear page of 1000  %lld keys, %lld pages, %.1fms\n",
              static_cast<long long>(walked), static_cast<long long>(pages),
              MsSince(t));
  load.paging = false;
  load.stop = true;
  decisions.join();
  PrintLatency("quiet", load.quiet_us);
  PrintLatency("while paging", load.paging_us);
  if (!check) return 0;
  const google::protobuf::Struct doc = Doc(first);
  const auto& f = doc.fields();
  const int64_t shown = std::min<int64_t>(open, 100);
  bool ok = Expect(first.status == 200, "status 200");
  ok &= Expect(f.at("scanned").number_value() == endpoints, "scanned == tracked");
  ok &= Expect(f.at("matched").number_value() == open, "matched == not clear");
  ok &= Expect(f.at("left_out").number_value() == open - shown, "left_out");
  ok &= Expect(f.at("endpoints").list_value().values_size() == shown, "rows");
  ok &= Expect(walked == open, "walked every not-clear key once");
  ok &= Expect(list.endpoints.size() == static_cast<size_t>(std::min<int64_t>(endpoints, 1000)),
               "List page");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace stagger::status

int main(int argc, char** argv) {
  const int64_t endpoints = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int64_t every = argc > 2 ? std::atoll(argv[2]) : 1000;
  const int requests = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool check = argc > 4 && std::string(argv[4]) == "--check";
  if (endpoints < 1 || every < 1 || requests < 1) {
    std::fprintf(stderr, "usage: stagger_status_scale [ENDPOINTS [NOT_CLEAR_EVERY [REQUESTS [--check]]]]\n");
    return 2;
  }
  return stagger::status::Run(endpoints, every, requests, check);
}
