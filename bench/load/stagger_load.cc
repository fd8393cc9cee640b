// stagger-load: closed-loop gRPC load generator for stagger.v1.RetryCoordinator
// (staggerd, or bench's stagger-noop-server for the ceiling of the stack).
//
// --channels separate channels (one TCP connection each), each with
// --inflight calls outstanding at all times: when a call completes, the next
// one starts from its completion callback (gRPC callback API, no thread per
// call). Runs for --warmup, then measures for --duration, then stops issuing
// and waits for the calls in flight.
//
// Every response is checked: a non-OK grpc status is an error, and so is an
// OK response of the wrong shape (no decision, verdict unset, or a batch
// answer whose size differs from the request's). Errors are counted over the
// whole run (warm-up included) and reported by status code; any error makes
// the exit status 1.
//
// Measured (calls that started after the warm-up and finished before the
// end): decisions/s (a batch call counts its items) and the call latency
// quantiles p50/p99/p99.9, microseconds, start of the call to its callback.
//
// The client is the instrument, not what is measured, and it shares the
// machine's CPUs with the server: it reuses its requests, parses answers
// into a per-loop arena and runs without Abseil's mutex deadlock detector.
//
// Replicas: --target may list several staggerd replicas (the client
// library's forms, client/coordinator_target.h). Each gets --channels channels, and the
// loops on them draw only keys that replica owns under the client
// library's rendezvous hashing (core/wire/rendezvous.h), so every call and
// every batch goes to its keys' owner, as CoordinatorClient would send it.
//
// Methods: admit, report (RETRYABLE_FAILURE of attempt 1 unless
// --report_outcome says otherwise), admit_batch and report_batch (--batch
// items per call). Keys cycle over --endpoints realistic endpoint keys
// (bench/bench_keys.h); a batch's items are distinct endpoints.
//
// Last line of stdout, machine-readable:
//   result method=M target=T channels=C inflight=I batch=B seconds=S calls=N
//     decisions=D errors=E calls_per_sec=X decisions_per_sec=Y p50_us=..
//     p99_us=.. p999_us=.. max_us=.. all_calls=A client_cpu_us_per_call=U
// all_calls counts every OK call of the run (warm-up included) and U is this
// process's CPU time (user + system) over the run divided by it: a cost per
// call that, unlike decisions/s, hardly moves when other processes compete
// for the machine.
// Exit status: 0 ok; 1 errors, or no decision measured; 2 bad flags or the
// target unreachable within --connect_timeout.
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_keys.h"
#include "bench/load/latency_histogram.h"
#include "client/internal/target_parser.h"
#include "core/cli/usage.h"
#include "core/wire/rendezvous.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "server address host:port, or several replicas (host:port,... or "
          "name=host:port,..., or dns:///headless-service:port): each "
          "replica gets --channels channels, whose calls carry only keys "
          "it owns (the client library's rendezvous hashing)");
ABSL_FLAG(int, channels, 2, "channels (TCP connections), >= 1");
ABSL_FLAG(int, inflight, 16, "calls outstanding per channel, >= 1");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5), "measured time");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1),
          "time before measuring (errors still count)");
ABSL_FLAG(std::string, method, "admit",
          "admit | report | admit_batch | report_batch");
ABSL_FLAG(int, batch, 100, "items per batch call (batch methods), >= 1");
ABSL_FLAG(int64_t, endpoints, 10000, "distinct endpoint keys cycled, >= 1");
ABSL_FLAG(std::string, report_outcome, "failure",
          "report methods: success | failure | rate_limited (Retry-After 1s)");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(5),
          "deadline of each call; DEADLINE_EXCEEDED is an error");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(10),
          "how long to wait for each channel to connect");

namespace stagger::bench {
namespace {

using google::protobuf::Arena;

enum class Method { kAdmit, kReport, kAdmitBatch, kReportBatch };

struct Options {
  std::string target;
  int channels = 1;
  int inflight = 1;
  absl::Duration duration;
  absl::Duration warmup;
  Method method = Method::kAdmit;
  std::string method_name;
  int batch = 1;
  int64_t endpoints = 1;
  v1::Outcome outcome = v1::RETRYABLE_FAILURE;
  bool retry_after = false;
  absl::Duration call_timeout;
  absl::Duration connect_timeout;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Shared by all loops; written before the first call starts.
struct Run {
  Options opt;
  int64_t measure_start_ns = 0;  // steady clock
  int64_t end_ns = 0;
  std::atomic<int> loops_running{0};
  absl::Notification all_done;
};

// One closed loop: one call outstanding at a time, the next started from
// the previous one's callback. Only its own callbacks touch it, and they
// never overlap (each starts the next call last), so it needs no lock.
class Loop {
 public:
  // With `owners`, the loop draws only keys that replica `self` owns.
  Loop(Run* run, v1::RetryCoordinator::Stub* stub, int64_t first_key,
       int64_t key_stride, const wire::Rendezvous* owners = nullptr,
       size_t self = 0)
      : run_(run),
        stub_(stub),
        next_key_(first_key),
        key_stride_(key_stride),
        owners_(owners),
        self_(self) {
    google::protobuf::ArenaOptions ao;
    ao.initial_block = arena_block_;
    ao.initial_block_size = sizeof(arena_block_);
    arena_ = std::make_unique<Arena>(ao);
    // Requests are built once; each call only rewrites the endpoint keys
    // (into the strings' existing capacity).
    const Options& o = run_->opt;
    const int items =
        (o.method == Method::kAdmitBatch || o.method == Method::kReportBatch)
            ? o.batch
            : 1;
    for (int i = 0; i < items; ++i) {
      InitAdmit(o.method == Method::kAdmitBatch ? admit_batch_.add_items()
                                                : &admit_);
      InitReport(o.method == Method::kReportBatch ? report_batch_.add_items()
                                                  : &report_);
    }
    expected_decisions_ = items;
  }

  void Start() { Issue(); }

  const LatencyHistogram& histogram() const { return hist_; }
  int64_t calls() const { return calls_; }
  int64_t decisions() const { return decisions_; }
  int64_t errors() const { return errors_; }
  int64_t all_calls() const { return all_calls_; }
  const std::array<int64_t, 17>& errors_by_code() const { return by_code_; }
  const std::string& first_error() const { return first_error_; }

 private:
  void InitAdmit(v1::AdmitRequest* r) { r->set_attempt(1); }
  void InitReport(v1::ReportRequest* r) {
    r->set_attempt(1);
    r->set_outcome(run_->opt.outcome);
    if (run_->opt.retry_after) r->mutable_retry_after()->set_seconds(1);
  }

  absl::string_view NextKey() {
    // Skips keys another replica owns (at most one lap of the keys: with
    // too few keys for this replica, a key goes to it all the same).
    for (int64_t tries = 0;; ++tries) {
      const absl::string_view k =
          FormatKey(static_cast<uint64_t>(next_key_), key_buf_);
      next_key_ = (next_key_ + key_stride_) % run_->opt.endpoints;
      if (owners_ == nullptr || owners_->Owner(k) == self_ ||
          tries >= run_->opt.endpoints) {
        return k;
      }
    }
  }

  // The next key, written into the request's string (no allocation once
  // the string has grown to the key length).
  void SetKey(std::string* out) {
    const absl::string_view k = NextKey();
    out->assign(k.data(), k.size());
  }

  void Issue() {
    const int64_t now = NowNs();
    if (now >= run_->end_ns) {
      if (run_->loops_running.fetch_sub(1) == 1) run_->all_done.Notify();
      return;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(run_->opt.call_timeout));
    start_ns_ = now;
    // The previous answer is checked and done with: its arena is reused.
    arena_->Reset();
    auto done = [this](grpc::Status s) { OnDone(std::move(s)); };
    auto* async = stub_->async();
    switch (run_->opt.method) {
      case Method::kAdmit:
        SetKey(admit_.mutable_endpoint());
        admit_resp_ = Arena::CreateMessage<v1::AdmitResponse>(arena_.get());
        async->Admit(ctx_.get(), &admit_, admit_resp_, std::move(done));
        break;
      case Method::kReport:
        SetKey(report_.mutable_endpoint());
        report_resp_ = Arena::CreateMessage<v1::ReportResponse>(arena_.get());
        async->Report(ctx_.get(), &report_, report_resp_, std::move(done));
        break;
      case Method::kAdmitBatch:
        for (auto& item : *admit_batch_.mutable_items()) {
          SetKey(item.mutable_endpoint());
        }
        admit_batch_resp_ =
            Arena::CreateMessage<v1::AdmitBatchResponse>(arena_.get());
        async->AdmitBatch(ctx_.get(), &admit_batch_, admit_batch_resp_,
                          std::move(done));
        break;
      case Method::kReportBatch:
        for (auto& item : *report_batch_.mutable_items()) {
          SetKey(item.mutable_endpoint());
        }
        report_batch_resp_ =
            Arena::CreateMessage<v1::ReportBatchResponse>(arena_.get());
        async->ReportBatch(ctx_.get(), &report_batch_, report_batch_resp_,
                           std::move(done));
        break;
    }
  }

  static bool ValidDecision(const v1::Decision& d) {
    return d.verdict() != v1::VERDICT_UNSPECIFIED &&
           d.reason() != v1::REASON_UNSPECIFIED;
  }

  // The number of decisions in an OK response, or -1 if its shape is wrong.
  int CheckResponse() const {
    switch (run_->opt.method) {
      case Method::kAdmit:
        return admit_resp_->has_decision() &&
                       ValidDecision(admit_resp_->decision())
                   ? 1
                   : -1;
      case Method::kReport:
        return report_resp_->has_decision() &&
                       ValidDecision(report_resp_->decision())
                   ? 1
                   : -1;
      case Method::kAdmitBatch: {
        if (admit_batch_resp_->decisions_size() != expected_decisions_) {
          return -1;
        }
        for (const auto& d : admit_batch_resp_->decisions()) {
          if (!ValidDecision(d)) return -1;
        }
        return expected_decisions_;
      }
      case Method::kReportBatch: {
        if (report_batch_resp_->decisions_size() != expected_decisions_) {
          return -1;
        }
        for (const auto& d : report_batch_resp_->decisions()) {
          if (!ValidDecision(d)) return -1;
        }
        return expected_decisions_;
      }
    }
    return -1;
  }

  void Error(int code, std::string what) {
    ++errors_;
    ++by_code_[code >= 0 && code < 17 ? code : 2];
    if (first_error_.empty()) first_error_ = std::move(what);
  }

  void OnDone(grpc::Status s) {
    const int64_t end = NowNs();
    if (!s.ok()) {
      Error(s.error_code(),
            absl::StrCat("status ", s.error_code(), ": ", s.error_message()));
    } else {
      const int n = CheckResponse();
      if (n < 0) {
        // OK status, malformed answer: counted under UNKNOWN (2).
        Error(2, "OK status but a malformed response (decision missing, "
                 "verdict/reason unset, or wrong batch size)");
      } else {
        ++all_calls_;
        if (start_ns_ >= run_->measure_start_ns && end <= run_->end_ns) {
          ++calls_;
          decisions_ += n;
          hist_.Record(end - start_ns_);
        }
      }
    }
    Issue();
  }

  Run* run_;
  v1::RetryCoordinator::Stub* stub_;
  int64_t next_key_;
  int64_t key_stride_;
  char key_buf_[kKeyBufferBytes];
  int expected_decisions_ = 1;

  std::unique_ptr<grpc::ClientContext> ctx_;
  int64_t start_ns_ = 0;
  const wire::Rendezvous* owners_;
  size_t self_;
  v1::AdmitRequest admit_;
  // Answers live on a per-loop arena (reset before each call; its first
  // block is the loop's own buffer), so parsing one allocates nothing.
  alignas(8) char arena_block_[32 * 1024];
  std::unique_ptr<Arena> arena_;
  v1::AdmitResponse* admit_resp_ = nullptr;
  v1::ReportRequest report_;
  v1::ReportResponse* report_resp_ = nullptr;
  v1::AdmitBatchRequest admit_batch_;
  v1::AdmitBatchResponse* admit_batch_resp_ = nullptr;
  v1::ReportBatchRequest report_batch_;
  v1::ReportBatchResponse* report_batch_resp_ = nullptr;

  LatencyHistogram hist_;
  int64_t calls_ = 0;
  int64_t decisions_ = 0;
  int64_t errors_ = 0;
  int64_t all_calls_ = 0;  // OK calls, warm-up and stragglers included
  std::array<int64_t, 17> by_code_{};
  std::string first_error_;
};

bool ParseOptions(Options* o, std::string* err) {
  o->target = absl::GetFlag(FLAGS_target);
  o->channels = absl::GetFlag(FLAGS_channels);
  o->inflight = absl::GetFlag(FLAGS_inflight);
  o->duration = absl::GetFlag(FLAGS_duration);
  o->warmup = absl::GetFlag(FLAGS_warmup);
  o->batch = absl::GetFlag(FLAGS_batch);
  o->endpoints = absl::GetFlag(FLAGS_endpoints);
  o->call_timeout = absl::GetFlag(FLAGS_call_timeout);
  o->connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  o->method_name = absl::GetFlag(FLAGS_method);
  if (o->method_name == "admit") {
    o->method = Method::kAdmit;
  } else if (o->method_name == "report") {
    o->method = Method::kReport;
  } else if (o->method_name == "admit_batch") {
    o->method = Method::kAdmitBatch;
  } else if (o->method_name == "report_batch") {
    o->method = Method::kReportBatch;
  } else {
    *err = "--method: one of admit, report, admit_batch, report_batch";
    return false;
  }
  const std::string outcome = absl::GetFlag(FLAGS_report_outcome);
  if (outcome == "success") {
    o->outcome = v1::SUCCESS;
  } else if (outcome == "failure") {
    o->outcome = v1::RETRYABLE_FAILURE;
  } else if (outcome == "rate_limited") {
    o->outcome = v1::RATE_LIMITED;
    o->retry_after = true;
  } else {
    *err = "--report_outcome: one of success, failure, rate_limited";
    return false;
  }
  if (o->channels < 1 || o->inflight < 1 || o->batch < 1 ||
      o->endpoints < 1) {
    *err = "--channels, --inflight, --batch and --endpoints must be >= 1";
    return false;
  }
  if (o->duration <= absl::ZeroDuration() ||
      o->warmup < absl::ZeroDuration()) {
    *err = "--duration must be > 0 and --warmup >= 0";
    return false;
  }
  return true;
}

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// User + system CPU time of this process so far, seconds.
double ProcessCpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The replicas --target names (one for a plain host:port).
absl::StatusOr<std::vector<client::Member>> Members(const std::string& target) {
  absl::StatusOr<client::MemberSpec> spec = client::ParseMembers(target);
  if (!spec.ok()) return spec.status();
  if (spec->dns_host.empty()) return spec->members;
  return client::ResolveDnsMembers(spec->dns_host, spec->dns_port);
}

// The connections to every replica: --channels channels each, all
// connected; per channel its stub and the replica it goes to.
struct Connections {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::RetryCoordinator::Stub>> stubs;
  std::vector<size_t> replica_of;
};

// Opens o.channels channels to each member, each on its own connection, and
// waits up to o.connect_timeout for each. False (the error printed) if one
// does not connect.
bool Connect(const std::vector<client::Member>& members, const Options& o,
             Connections* out) {
  for (size_t r = 0; r < members.size(); ++r) {
    const std::string& target = members[r].target;
    for (int c = 0; c < o.channels; ++c) {
      grpc::ChannelArguments args;
      // A channel arg that differs per channel, and no shared subchannel
      // pool: each channel gets its own connection.
      args.SetInt("stagger.load.channel_index", c);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetMaxReceiveMessageSize(64 << 20);
      auto ch = grpc::CreateCustomChannel(
          target, grpc::InsecureChannelCredentials(), args);
      if (!ch->WaitForConnected(std::chrono::system_clock::now() +
                                absl::ToChronoNanoseconds(o.connect_timeout))) {
        std::fprintf(stderr, "stagger-load: cannot connect to %s within %s\n",
                     target.c_str(),
                     absl::FormatDuration(o.connect_timeout).c_str());
        return false;
      }
      out->stubs.push_back(v1::RetryCoordinator::NewStub(ch));
      out->channels.push_back(std::move(ch));
      out->replica_of.push_back(r);
    }
  }
  return true;
}

// --inflight loops per channel. Loop i takes keys i, i + L, i + 2L, ...
// (mod --endpoints). With several replicas (`owners` set), the L_r loops of
// replica r take the keys j, j + L_r, ... that r owns (j: the loop's
// number among them), so together they cover every key r owns.
std::vector<std::unique_ptr<Loop>> MakeLoops(Run* run, const Connections& conn,
                                             size_t replicas,
                                             const wire::Rendezvous* owners) {
  const Options& o = run->opt;
  const int num_loops = static_cast<int>(conn.stubs.size()) * o.inflight;
  const int loops_per_replica = num_loops / static_cast<int>(replicas);
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<int> numbered(replicas, 0);
  for (int i = 0; i < num_loops; ++i) {
    const size_t ch = static_cast<size_t>(i) % conn.stubs.size();
    const int j = owners != nullptr ? numbered[conn.replica_of[ch]]++ : i;
    loops.push_back(std::make_unique<Loop>(
        run, conn.stubs[ch].get(), j % o.endpoints,
        owners != nullptr ? loops_per_replica : num_loops, owners,
        conn.replica_of[ch]));
  }
  return loops;
}

// Starts every loop and waits until the last one ends; returns the
// process's CPU seconds spent meanwhile.
double RunLoops(Run* run, const std::vector<std::unique_ptr<Loop>>& loops) {
  const double cpu0 = ProcessCpuSeconds();
  const int64_t t0 = NowNs();
  run->measure_start_ns = t0 + absl::ToInt64Nanoseconds(run->opt.warmup);
  run->end_ns = run->measure_start_ns + absl::ToInt64Nanoseconds(run->opt.duration);
  run->loops_running.store(static_cast<int>(loops.size()));
  for (auto& l : loops) l->Start();
  run->all_done.WaitForNotification();
  return ProcessCpuSeconds() - cpu0;
}

// Every loop's counts added up.
struct Totals {
  LatencyHistogram hist;
  int64_t calls = 0, decisions = 0, errors = 0, all_calls = 0;
  std::array<int64_t, 17> by_code{};
  std::string first_error;  // the first loop's that had one
};

Totals Sum(const std::vector<std::unique_ptr<Loop>>& loops) {
  Totals t;
  for (const auto& l : loops) {
    t.hist.Merge(l->histogram());
    t.calls += l->calls();
    t.decisions += l->decisions();
    t.errors += l->errors();
    t.all_calls += l->all_calls();
    for (int c = 0; c < 17; ++c) t.by_code[c] += l->errors_by_code()[c];
    if (t.first_error.empty()) t.first_error = l->first_error();
  }
  return t;
}

// The errors by status code on stderr (if any), then the one "result" line
// on stdout.
void PrintResult(const Options& o, const Totals& t, double cpu_s) {
  const bool batched =
      o.method == Method::kAdmitBatch || o.method == Method::kReportBatch;
  const double seconds = absl::ToDoubleSeconds(o.duration);
  if (t.errors > 0) {
    std::string codes;
    for (int c = 0; c < 17; ++c) {
      if (t.by_code[c] > 0) absl::StrAppend(&codes, " code", c, "=", t.by_code[c]);
    }
    std::fprintf(stderr, "stagger-load: %lld errors:%s; first: %s\n",
                 static_cast<long long>(t.errors), codes.c_str(),
                 t.first_error.c_str());
  }
  std::printf(
      "result method=%s target=%s channels=%d inflight=%d batch=%d "
      "seconds=%.2f calls=%lld decisions=%lld errors=%lld "
      "calls_per_sec=%.0f decisions_per_sec=%.0f p50_us=%.1f p99_us=%.1f "
      "p999_us=%.1f max_us=%.1f all_calls=%lld client_cpu_us_per_call=%.2f\n",
      o.method_name.c_str(), o.target.c_str(), o.channels, o.inflight,
      batched ? o.batch : 1, seconds, static_cast<long long>(t.calls),
      static_cast<long long>(t.decisions), static_cast<long long>(t.errors),
      t.calls / seconds, t.decisions / seconds, Us(t.hist.Quantile(0.5)),
      Us(t.hist.Quantile(0.99)), Us(t.hist.Quantile(0.999)), Us(t.hist.max_ns()),
      static_cast<long long>(t.all_calls),
      t.all_calls > 0 ? cpu_s * 1e6 / static_cast<double>(t.all_calls) : 0.0);
  std::fflush(stdout);
}

// Flags (exit 2), replicas and connections (exit 2), the run, the result;
// exit 1 if any call failed or no decision was measured.
int Main() {
  Run run;
  std::string err;
  if (!ParseOptions(&run.opt, &err)) {
    std::fprintf(stderr, "stagger-load: %s\n", err.c_str());
    return 2;
  }
  const Options& o = run.opt;
  absl::StatusOr<std::vector<client::Member>> members = Members(o.target);
  if (!members.ok()) {
    std::fprintf(stderr, "stagger-load: --%s\n",
                 std::string(members.status().message()).c_str());
    return 2;
  }
  std::vector<std::string> names;
  for (const client::Member& m : *members) names.push_back(m.name);
  const wire::Rendezvous owners = *wire::Rendezvous::Create(names);
  const bool sharded = members->size() > 1;

  Connections conn;
  if (!Connect(*members, o, &conn)) return 2;
  const std::vector<std::unique_ptr<Loop>> loops =
      MakeLoops(&run, conn, members->size(), sharded ? &owners : nullptr);
  const double cpu_s = RunLoops(&run, loops);
  const Totals totals = Sum(loops);
  PrintResult(o, totals, cpu_s);
  return totals.errors > 0 || totals.decisions == 0 ? 1 : 0;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/load/).
  stagger::cli::InstallUsage(
      "Closed-loop load generator for stagger.v1.RetryCoordinator; see the "
      "header of bench/load/stagger_load.cc.",
      "bench/load");
  absl::ParseCommandLine(argc, argv);
  // The client is the measuring instrument, not what is measured: it skips
  // Abseil's mutex deadlock detector (on in Debian's build; gRPC's locks are
  // absl::Mutex) to leave more of the shared CPUs to the server under test.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return stagger::bench::Main();
}
