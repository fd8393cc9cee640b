// The C++ client against every conformance scenario
// (tests/conformance/README.md): the real CoordinatorClient on a scripted
// gRPC coordinator in this process (scripted_coordinator.h), a fake clock,
// and RetryLoop run through a recorder. One gtest per scenario, registered
// from the files at start (ctest "conformance.cpp.<name>").
//
// The C++ client's fallback is the full engine with its own randomness
// (docs/CLIENT_CONTRACT.md, "The fallback"): where a scenario writes a drawn
// delay as {"value", "range"}, this runner holds it to the range; verdicts,
// reasons and everything else exactly as the other languages.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "client/http_outcome.h"
#include "client/retry_loop.h"
#include "core/engine/decision.h"
#include "core/engine/random.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/conformance/cpp/scripted_coordinator.h"
#include "tests/testing/fake_clock.h"

namespace stagger::conformance {
namespace {

using client::AdmitRequest;
using client::ClientDecision;
using client::ReportRequest;

constexpr absl::Time kT0 = absl::FromUnixSeconds(1767225600);
constexpr double kTolerance = 1e-6;

Value Num(double v) {
  Value out;
  out.set_number_value(v);
  return out;
}
Value Str(const std::string& s) {
  Value out;
  out.set_string_value(s);
  return out;
}
double Rel(absl::Time t) { return absl::ToDoubleSeconds(t - kT0); }
absl::Time Abs(const Value& v) { return kT0 + absl::Seconds(v.number_value()); }
std::string Json(const google::protobuf::Message& m) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out);
  return out;
}
const Value* Get(const Struct& s, const std::string& k) {
  auto it = s.fields().find(k);
  return it == s.fields().end() ? nullptr : &it->second;
}

// ---- what happened, as trace events (README.md, "The trace") ---------------

class Trace {
 public:
  void Add(std::vector<Value> event) {
    Value e;
    for (Value& v : event) *e.mutable_list_value()->add_values() = std::move(v);
    *events_.add_values() = std::move(e);
  }
  const google::protobuf::ListValue& events() const { return events_; }

 private:
  google::protobuf::ListValue events_;
};

Value Answer(const absl::StatusOr<ClientDecision>& d) {
  Value out;
  auto& f = *out.mutable_struct_value()->mutable_fields();
  if (!d.ok()) {
    if (absl::IsInvalidArgument(d.status())) {
      f["error"] = Str("INVALID_ARGUMENT");
      f["message"] = Str(std::string(d.status().message()));
    } else {
      f["error"] = Str(absl::StatusCodeToString(d.status().code()));
    }
    return out;
  }
  f["verdict"] = Str(engine::VerdictName(d->verdict));
  f["reason"] = Str(engine::ReasonName(d->reason));
  f["source"] = Str(d->source == client::DecisionSource::kCoordinator
                        ? "coordinator" : "local");
  if (d->verdict == engine::Verdict::kProceed) {
    f["delay"] = Num(absl::ToDoubleSeconds(d->delay));
  }
  if (d->verdict == engine::Verdict::kDefer) {
    f["defer_for"] = Num(absl::ToDoubleSeconds(d->defer_for));
  }
  return out;
}

// The loop's coordinator: passes each call to the client and records it.
class Recorder final : public client::Coordinator {
 public:
  Recorder(client::CoordinatorClient* c, Trace* trace) : c_(c), trace_(trace) {}

  absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in) override {
    return Record("admit", AdmitArgs(in), c_->Admit(in));
  }
  absl::StatusOr<ClientDecision> AdmitWaiting(
      const AdmitRequest& in, const client::Canceller* cancel) override {
    return Record("admit", AdmitArgs(in), c_->AdmitWaiting(in, cancel));
  }
  absl::StatusOr<ClientDecision> Report(const ReportRequest& in) override {
    Value args;
    auto& f = *args.mutable_struct_value()->mutable_fields();
    f["attempt"] = Num(in.attempt);
    f["outcome"] = Str(engine::OutcomeName(in.outcome));
    f["admission"] = Num(static_cast<double>(in.admission));
    if (in.retry_after) f["retry_after"] = Num(absl::ToDoubleSeconds(*in.retry_after));
    Times(in.deadline, in.first_attempt_time, &f);
    return Record("report", std::move(args), c_->Report(in));
  }

 private:
  static void Times(absl::Time deadline, absl::Time first,
                    google::protobuf::Map<std::string, Value>* f) {
    if (deadline != absl::InfiniteFuture()) (*f)["deadline"] = Num(Rel(deadline));
    if (first != absl::InfinitePast()) (*f)["first_attempt_time"] = Num(Rel(first));
  }
  static Value AdmitArgs(const AdmitRequest& in) {
    Value args;
    auto& f = *args.mutable_struct_value()->mutable_fields();
    f["attempt"] = Num(in.attempt);
    if (in.wait > absl::ZeroDuration()) f["wait"] = Num(absl::ToDoubleSeconds(in.wait));
    Times(in.deadline, in.first_attempt_time, &f);
    return args;
  }
  absl::StatusOr<ClientDecision> Record(const char* kind, Value args,
                                        absl::StatusOr<ClientDecision> d) {
    trace_->Add({Str(kind), std::move(args), Answer(d)});
    return d;
  }

  client::CoordinatorClient* c_;
  Trace* trace_;
};

// ---- comparison ---------------------------------------------------------------

// `want` (the file's, with {"value", "range"} for drawn delays) against
// `got`; the C++ fallback is held to the range.
bool Same(const Value& want, const Value& got) {
  if (want.has_struct_value() && want.struct_value().fields().contains("range")) {
    const auto& r = want.struct_value().fields().at("range").list_value();
    return got.has_number_value() &&
           got.number_value() >= r.values(0).number_value() - kTolerance &&
           got.number_value() <= r.values(1).number_value() + kTolerance;
  }
  if (want.kind_case() != got.kind_case()) return false;
  switch (want.kind_case()) {
    case Value::kNumberValue:
      return std::abs(want.number_value() - got.number_value()) <= kTolerance;
    case Value::kListValue: {
      const auto& w = want.list_value().values();
      const auto& g = got.list_value().values();
      if (w.size() != g.size()) return false;
      for (int i = 0; i < w.size(); ++i) {
        if (!Same(w[i], g[i])) return false;
      }
      return true;
    }
    case Value::kStructValue: {
      const auto& w = want.struct_value().fields();
      const auto& g = got.struct_value().fields();
      if (w.size() != g.size()) return false;
      for (const auto& [k, v] : w) {
        if (!g.contains(k) || !Same(v, g.at(k))) return false;
      }
      return true;
    }
    default:
      return want.SerializeAsString() == got.SerializeAsString();
  }
}

// The expected trace with the defaults filled in (source "coordinator",
// a PROCEED's delay 0).
Value Normalize(const Value& trace) {
  Value out = trace;
  for (Value& ev : *out.mutable_list_value()->mutable_values()) {
    auto* e = ev.mutable_list_value()->mutable_values();
    if (e->size() != 3) continue;
    auto& a = *(*e)[2].mutable_struct_value()->mutable_fields();
    if (!a.contains("verdict")) continue;
    if (!a.contains("source")) a["source"] = Str("coordinator");
    if (a["verdict"].string_value() == "PROCEED" && !a.contains("delay")) {
      a["delay"] = Num(0);
    }
  }
  return out;
}

// ---- running one scenario ---------------------------------------------------

engine::EngineConfig PolicyOf(const Struct& s) {
  engine::EngineConfig c;
  const Value* p = Get(s, "policy");
  if (p == nullptr) return c;
  engine::PolicyParams& d = c.default_policy;
  for (const auto& [k, v] : p->struct_value().fields()) {
    const double x = v.number_value();
    const absl::Duration t = absl::Seconds(x);
    if (k == "backoff_base") d.backoff.base = t;
    else if (k == "backoff_cap") d.backoff.cap = t;
    else if (k == "max_attempts") d.backoff.max_attempts = static_cast<int>(x);
    else if (k == "initial_jitter") d.backoff.initial_jitter = t;
    else if (k == "retry_after_max") d.backoff.retry_after_max = t;
    else if (k == "consecutive_failures") d.breaker.consecutive_failures = static_cast<int>(x);
    else if (k == "failure_ratio") d.breaker.failure_ratio = x;
    else if (k == "min_throughput") d.breaker.min_throughput = static_cast<int>(x);
    else if (k == "window") d.breaker.window = t;
    else if (k == "open_base") d.breaker.open_base = t;
    else if (k == "open_max") d.breaker.open_max = t;
    else if (k == "half_open_probes") d.breaker.half_open_probes = static_cast<int>(x);
    else if (k == "close_after_successes") d.breaker.close_after_successes = static_cast<int>(x);
    else if (k == "probe_timeout") d.breaker.probe_timeout = t;
    else if (k == "spread") d.deferral.spread = t;
    else if (k == "max_key_bytes") c.limits.max_key_bytes = static_cast<int>(x);
    else ADD_FAILURE() << "unknown policy field " << k;
  }
  return c;
}

client::AttemptResult SendOne(const Struct& s, testing::FakeClock* clock) {
  const Value* http = Get(s, "http");
  if (http != nullptr) {
    const Value* h = Get(s, "retry_after_header");
    return {client::OutcomeFromHttpStatus(static_cast<int>(http->number_value())),
            h == nullptr ? std::nullopt
                         : client::ParseRetryAfter(h->string_value(), clock->Now())};
  }
  if (const Value* fails = Get(s, "fails"); fails != nullptr) {
    // C++ sends do not throw: no answer is status 0; a timeout, TIMEOUT.
    return {fails->string_value() == "timeout"
                ? engine::Outcome::kTimeout
                : client::OutcomeFromHttpStatus(0),
            std::nullopt};
  }
  v1::Outcome o = v1::OUTCOME_UNSPECIFIED;
  v1::Outcome_Parse(s.fields().at("outcome").string_value(), &o);
  client::AttemptResult r{static_cast<engine::Outcome>(o), std::nullopt};
  if (const Value* ra = Get(s, "retry_after"); ra != nullptr) {
    r.retry_after = absl::Seconds(ra->number_value());
  }
  return r;
}

Value EndOf(const client::LoopResult& r) {
  Value out;
  auto& f = *out.mutable_struct_value()->mutable_fields();
  f["end"] = Str(client::LoopEndName(r.end));
  f["attempts_made"] = Num(r.attempts_made);
  f["next_attempt"] = Num(r.next_attempt);
  if ((r.end == client::LoopEnd::kGaveUp || r.end == client::LoopEnd::kDeferred) &&
      r.last_decision) {
    f["reason"] = Str(engine::ReasonName(r.last_decision->reason));
  }
  if (r.end == client::LoopEnd::kDeferred) {
    f["defer_for"] = Num(absl::ToDoubleSeconds(r.last_decision->defer_for));
  }
  if (r.first_attempt_time != absl::InfinitePast()) {
    f["first_attempt_time"] = Num(Rel(r.first_attempt_time));
  }
  if (r.end == client::LoopEnd::kError) {
    if (absl::IsInvalidArgument(r.error)) {
      f["error"] = Str("INVALID_ARGUMENT");
      f["message"] = Str(std::string(r.error.message()));
    } else {
      f["error"] = Str(absl::IsInternal(r.error) ? "PROTOCOL" : r.error.ToString());
    }
  }
  return out;
}

struct Run {
  ScriptedCoordinator* coordinator;
  client::CoordinatorClient* client;
  testing::FakeClock* clock;
};

Value RunDelivery(const Run& run, const Struct& d) {
  Trace trace;
  client::Canceller cancel;
  run.coordinator->set_canceller(&cancel);
  if (const Value* v = Get(d, "cancel_before"); v && v->bool_value()) cancel.Cancel();
  const Value* o = Get(d, "options");
  const Struct opts = o == nullptr ? Struct() : o->struct_value();
  client::RetryLoopOptions lo;
  if (const Value* v = Get(opts, "deadline")) lo.deadline = Abs(*v);
  if (const Value* v = Get(opts, "first_attempt")) lo.first_attempt = static_cast<int>(v->number_value());
  if (const Value* v = Get(opts, "first_attempt_time")) lo.first_attempt_time = Abs(*v);
  if (const Value* v = Get(opts, "waiting")) lo.waiting = v->bool_value();
  if (const Value* v = Get(opts, "park_limit")) lo.park_limit = absl::Seconds(v->number_value());
  if (const Value* v = Get(opts, "attempt_timeout")) lo.attempt_timeout = absl::Seconds(v->number_value());
  lo.clock = run.clock;
  const Value* k = Get(d, "cancel_in_sleep");
  int sleeps = 0;
  lo.wait = [&](absl::Duration t, const client::Canceller& c) {
    trace.Add({Str("sleep"), Num(absl::ToDoubleSeconds(t))});
    if (k != nullptr && ++sleeps == static_cast<int>(k->number_value())) {
      cancel.Cancel();
      return false;
    }
    if (c.cancelled()) return false;
    run.clock->Advance(t);
    return true;
  };
  std::vector<Struct> sends;
  if (const Value* s = Get(d, "sends")) {
    for (const Value& v : s->list_value().values()) sends.push_back(v.struct_value());
  }
  size_t sent = 0;
  const absl::Duration timeout = lo.attempt_timeout;
  auto send = [&](const client::Attempt& a) {
    trace.Add({Str("send"), Num(a.number)});
    EXPECT_EQ(a.timeout, timeout) << "attempt " << a.number;
    if (sent >= sends.size()) {
      ADD_FAILURE() << "an attempt beyond the scripted sends";
      return client::AttemptResult{};
    }
    const Struct& s = sends[sent++];
    if (const Value* t = Get(s, "takes")) run.clock->Advance(absl::Seconds(t->number_value()));
    if (const Value* c = Get(s, "cancel"); c && c->bool_value()) cancel.Cancel();
    return SendOne(s, run.clock);
  };
  Recorder recorder(run.client, &trace);
  const client::RetryLoop loop(&recorder, &cancel, std::move(lo));
  const Value* ep = Get(d, "endpoint");
  const std::string endpoint = ep ? ep->string_value() : "https://hooks.example.com";
  const client::LoopResult r = loop.Run(endpoint, send);
  trace.Add({Str("end"), EndOf(r)});
  EXPECT_EQ(sent, sends.size()) << "scripted sends not sent";
  Value out;
  *out.mutable_list_value() = trace.events();
  return out;
}

void RunScenario(ScriptedCoordinator* coordinator, const Struct& s) {
  testing::FakeClock clock(kT0);
  coordinator->Load(s.fields().at("coordinator"), &clock);
  const Value* seed = Get(s, "seed");
  engine::SeededRandom random(seed ? static_cast<uint64_t>(seed->number_value()) : 1);
  client::ClientOptions o;
  o.target = coordinator->target();
  o.call_deadline = absl::Seconds(5);  // a loaded machine: never a real timeout
  o.clock = &clock;
  o.random = &random;
  o.local_policy = PolicyOf(s);
  auto c = client::CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  // The channel up, used, and seen up by the replica's watcher before the
  // first scripted failure (a READY noticed after one would probe early).
  ASSERT_TRUE((*c)->WaitForCoordinator(absl::Seconds(10)));
  client::AdmitRequest warm_up;
  warm_up.endpoint = ScriptedCoordinator::kWarmUp;
  warm_up.attempt = 1;
  ASSERT_TRUE((*c)->Admit(warm_up).ok());
  absl::SleepFor(absl::Milliseconds(50));
  const Run run{coordinator, c->get(), &clock};
  int n = 0;
  for (const Value& d : s.fields().at("deliveries").list_value().values()) {
    ++n;
    const Value got = RunDelivery(run, d.struct_value());
    const Value want = Normalize(d.struct_value().fields().at("trace"));
    EXPECT_TRUE(Same(want, got)) << "delivery " << n << "\nwant " << Json(want)
                                 << "\ngot  " << Json(got);
  }
  for (const std::string& p : coordinator->problems()) ADD_FAILURE() << p;
}

std::vector<Struct> LoadScenarios() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(
           std::string(STAGGER_CONFORMANCE_DIR) + "/scenarios")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Struct> out;
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    Struct file;
    const auto st = google::protobuf::util::JsonStringToMessage(text.str(), &file);
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", f.c_str(), st.ToString().c_str());
      std::abort();
    }
    for (const Value& v : file.fields().at("scenarios").list_value().values()) {
      out.push_back(v.struct_value());
    }
  }
  return out;
}

// The one coordinator every scenario of this process talks to: made for
// the first scenario, destroyed (its server's threads joined) before exit.
std::unique_ptr<ScriptedCoordinator>& TheCoordinator() {
  static auto* const c = new std::unique_ptr<ScriptedCoordinator>();
  return *c;
}
ScriptedCoordinator* Coordinator() {
  std::unique_ptr<ScriptedCoordinator>& c = TheCoordinator();
  if (c == nullptr) c = std::make_unique<ScriptedCoordinator>();
  return c.get();
}

class ScenarioTest : public ::testing::Test {
 public:
  explicit ScenarioTest(Struct s) : s_(std::move(s)) {}
  void TestBody() override { RunScenario(Coordinator(), s_); }

 private:
  Struct s_;
};

TEST(Conformance, EveryScenarioIsRegistered) {
  const std::vector<Struct> all = LoadScenarios();
  EXPECT_GE(all.size(), 60u);
  EXPECT_EQ(client::kDefaultAttemptTimeout, absl::Seconds(30));
}

}  // namespace
}  // namespace stagger::conformance

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (auto& s : stagger::conformance::LoadScenarios()) {
    const std::string name = s.fields().at("name").string_value();
    ::testing::RegisterTest(
        "Scenario", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
        [s]() -> ::testing::Test* {
          return new stagger::conformance::ScenarioTest(s);
        });
  }
  const int failed = RUN_ALL_TESTS();
  stagger::conformance::TheCoordinator().reset();
  return failed;
}
