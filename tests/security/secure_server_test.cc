// staggerd with TLS, mutual TLS and an authorization policy, tested from
// outside: the real binary on loopback ports, certificates made by openssl
// in the test's scratch directory (make_certs.sh: a CA; a server
// certificate and its successor; worker, reader and admin client
// certificates; one from another CA), clients through the client library's
// TLS options (client/tls_options.h, the same code staggerctl and the
// example worker use).
//
// Every refusal is checked from the client's side (the status code it
// gets) and, where staggerd counts it, in /metrics:
//   plaintext client, no client certificate, another CA's certificate:
//     the handshake fails (UNAVAILABLE), no call reaches a handler;
//   a worker on ListEndpoints / Admin, a reader on Admit: PERMISSION_DENIED,
//     counted in stagger_authz_denied_total;
//   a policy without client certificates, unreadable or mismatched
//     certificate files, a bad policy file: staggerd refuses to start
//     (exit 2) naming the flag.
// Agents: only the agents role opens the lease stream (a worker is
//   refused Sync); a certificate cannot act as another's agent (its id is
//   bound to its principal; an id naming another principal is refused);
//   hostile count reports are refused by the message's limits (named) or
//   cut by a bucket's cap (counted).
// Rotation: a Kubernetes Secret's symlink swap and a plain file renamed
// over the old one both reach new connections.
// Replicas: two under mutual TLS, a worker's client routing to both.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_join.h"
#include "client/coordinator_client.h"
#include "client/tls_options.h"
#include "tests/testing/requests.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "stagger/v1/watch.grpc.pb.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "stagger/v1/sync.grpc.pb.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/files.h"
#include "tests/testing/kubelet_volume.h"
#include "tests/testing/staggerd_process.h"

namespace stagger {
namespace {

using ::testing::HasSubstr;
using testing::KubeletVolume;
using testing::PollUntil;
using testing::ReadFile;
using testing::ReplaceFile;
using testing::ScratchDir;
using testing::ScrapeMetric;
using testing::StaggerdProcess;
using testing::WriteFile;

constexpr char kDeniedCoordinator[] =
    "stagger_authz_denied_total{cause=\"no_allow_rule\",service=\"stagger.v1."
    "RetryCoordinator\"}";
constexpr char kDeniedAdmin[] =
    "stagger_authz_denied_total{cause=\"no_allow_rule\",service=\"stagger.v1."
    "Admin\"}";

class SecureServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    const std::string cmd =
        absl::StrCat(MAKE_CERTS, " ", dir_.path(), "/certs");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ASSERT_EQ(mkdir((dir_ / "secret").c_str(), 0700), 0);
    ASSERT_TRUE(PutSecret(Cert("server.pem"), Cert("server.key")));
    ASSERT_TRUE(WriteFile(policy_path(), ReadFile(SECURITY_TESTDATA "/policy.json")));
  }

  std::string Cert(const std::string& name) const {
    return dir_ / ("certs/" + name);
  }
  std::string policy_path() const { return dir_ / "policy.json"; }
  // A new version of the Secret volume: these files as tls.crt, tls.key.
  bool PutSecret(const std::string& cert, const std::string& key) {
    return secret_.Update(
        {{"tls.crt", ReadFile(cert)}, {"tls.key", ReadFile(key)}});
  }

  // staggerd with TLS from the Secret mount (or from `cert` and `key`).
  std::vector<std::string> TlsArgs(bool mutual, bool authz,
                                   const std::string& cert = "",
                                   const std::string& key = "") const {
    std::vector<std::string> args = {
        "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
        "--tls_cert_file=" + (cert.empty() ? secret_.path("tls.crt") : cert),
        "--tls_key_file=" + (key.empty() ? secret_.path("tls.key") : key),
        "--tls_refresh_interval=1s",
        "--authz_poll_interval=100ms", "--health_address=127.0.0.1:0"};
    if (mutual) args.push_back("--tls_client_ca_file=" + Cert("ca.pem"));
    if (authz) args.push_back("--authz_policy_file=" + policy_path());
    return args;
  }

  void Start(std::vector<std::string> args) {
    auto p = StaggerdProcess::Start(STAGGERD_PATH, std::move(args));
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
  }

  // A channel as `who` ("worker", "reader", "admin", "rogue"; "" for no
  // client certificate) trusting `ca`; "plaintext" for no TLS at all.
  std::shared_ptr<grpc::Channel> Channel(const std::string& who,
                                         const std::string& ca = "ca.pem") {
    client::ClientTlsOptions tls;
    if (who != "plaintext") {
      tls.ca_file = Cert(ca);
      tls.server_name = "stagger.test";
      if (!who.empty()) {
        tls.cert_file = Cert(who + ".pem");
        tls.key_file = Cert(who + ".key");
      }
    }
    auto ch = client::MakeChannel(server_->target(), tls);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? *ch : nullptr;
  }

  // One Admit; `cn` gets the server certificate's common name.
  static grpc::Status Admit(const std::shared_ptr<grpc::Channel>& ch,
                            std::string* cn = nullptr,
                            v1::AdmitResponse* out = nullptr) {
    auto stub = v1::RetryCoordinator::NewStub(ch);
    v1::AdmitRequest req;
    req.set_endpoint("https://hooks.example.com/a");
    req.set_attempt(1);
    v1::AdmitResponse local;
    v1::AdmitResponse& resp = out != nullptr ? *out : local;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Status s = stub->Admit(&ctx, req, &resp);
    if (cn != nullptr && ctx.auth_context() != nullptr) {
      for (const auto& v :
           ctx.auth_context()->FindPropertyValues("x509_common_name")) {
        *cn = std::string(v.data(), v.size());
      }
    }
    return s;
  }
  static grpc::Status List(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::RetryCoordinator::NewStub(ch);
    v1::ListEndpointsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stub->ListEndpoints(&ctx, v1::ListEndpointsRequest(), &resp);
  }
  // An Admin call (ListPauses: changes nothing).
  static grpc::Status AdminCall(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::Admin::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::ListPausesResponse resp;
    return stub->ListPauses(&ctx, v1::ListPausesRequest(), &resp);
  }
  // The first message of a Watch stream (the observers' role).
  static grpc::Status WatchCall(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::EndpointWatch::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto reader = stub->Watch(&ctx, v1::WatchRequest());
    v1::WatchResponse first;
    if (reader->Read(&first)) {
      ctx.TryCancel();
      while (reader->Read(&first)) {
      }
      reader->Finish();
      return grpc::Status::OK;
    }
    return reader->Finish();
  }
  double Metric(const char* series) const {
    return ScrapeMetric(server_->metrics_port(), series).value_or(-1);
  }

  ScratchDir dir_;
  // A Kubernetes Secret volume, updated the kubelet's way.
  KubeletVolume secret_{dir_ / "secret"};
  std::unique_ptr<StaggerdProcess> server_;
};

// One lease stream (stagger.v1.AgentSync/Sync) over `ch`, opened by a
// hello for agent `id` (incarnation 7) whose first message carries count
// report 1. Read() and Counts() fail (false, 0) once the stream ends.
class AgentStream {
 public:
  AgentStream(const std::shared_ptr<grpc::Channel>& ch, const std::string& id)
      : stub_(v1::AgentSync::NewStub(ch)) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    stream_ = stub_->Sync(&ctx_);
    v1::SyncUp hello;
    hello.mutable_hello()->set_agent_id(id);
    hello.mutable_hello()->set_incarnation(7);
    hello.mutable_hello()->set_protocol(2);
    hello.mutable_hello()->set_next_count_seq(1);
    hello.set_number(1);
    AddCounts(&hello, 1);
    sent_ = stream_->Write(hello);
  }
  // The first message down (the snapshot); false if the stream ended.
  bool Opened() {
    v1::SyncDown down;
    return sent_ && stream_->Read(&down) && down.has_snapshot();
  }
  // Sends count report `seq`; the applied_seq of the answer (0: ended).
  uint64_t Counts(uint64_t seq) {
    v1::SyncUp up;
    up.set_number(++number_);
    AddCounts(&up, seq);
    if (!stream_->Write(up)) return 0;
    v1::SyncDown down;
    while (stream_->Read(&down)) {  // pushes of the set carry no applied_seq
      if (down.applied_seq() != 0) return down.applied_seq();
    }
    return 0;
  }
  // Sends a count report `seq` of `endpoints` keys, each with `buckets`
  // buckets of `answers` first attempts; the stream's end status if that
  // ends it, else OK once it is answered.
  grpc::Status SendCounts(uint64_t seq, int endpoints, int buckets,
                          uint32_t answers) {
    v1::SyncUp up;
    up.set_number(++number_);
    v1::CountReport* r = up.mutable_counts();
    r->set_seq(seq);
    const int64_t start = absl::ToUnixSeconds(absl::Now()) - 1;
    for (int e = 0; e < endpoints; ++e) {
      v1::EndpointCounts* c = r->add_endpoints();
      c->set_endpoint(absl::StrCat("https://made-up-", e, ".example/"));
      for (int b = 0; b < buckets; ++b) {
        v1::CountBucket* bucket = c->add_buckets();
        bucket->mutable_start()->set_seconds(start);
        bucket->set_first_attempts(answers);
      }
    }
    if (!stream_->Write(up)) return End();
    v1::SyncDown down;
    while (stream_->Read(&down)) {
      if (down.applied_seq() != 0) return grpc::Status::OK;
    }
    return stream_->Finish();
  }
  grpc::Status End() {
    stream_->WritesDone();
    v1::SyncDown down;
    while (stream_->Read(&down)) {
    }
    return stream_->Finish();
  }

 private:
  static void AddCounts(v1::SyncUp* up, uint64_t seq) {
    v1::CountReport* r = up->mutable_counts();
    r->set_seq(seq);
    v1::EndpointCounts* e = r->add_endpoints();
    e->set_endpoint("https://hooks.example.com/a");
    v1::CountBucket* b = e->add_buckets();
    b->mutable_start()->set_seconds(absl::ToUnixSeconds(absl::Now()) - 1);
    b->set_first_attempts(1);
  }

  std::unique_ptr<v1::AgentSync::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>> stream_;
  bool sent_ = false;
  uint64_t number_ = 1;
};

// The lease stream needs the agents role: a worker's certificate, which may
// Admit, is refused Sync (PERMISSION_DENIED, counted); an agent's is served
// (its snapshot comes down).
TEST_F(SecureServerTest, OnlyTheAgentsRoleMayOpenTheLeaseStream) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  AgentStream worker(Channel("worker"), "node-1");
  EXPECT_FALSE(worker.Opened());
  const grpc::Status refused = worker.End();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("/stagger.v1.AgentSync/Sync for "
                        "spiffe://stagger.test/worker"));
  EXPECT_TRUE(Admit(Channel("worker")).ok());

  AgentStream agent(Channel("agent"), "node-1");
  EXPECT_TRUE(agent.Opened());
  EXPECT_EQ(agent.Counts(2), 2u);
  EXPECT_TRUE(Admit(Channel("agent")).ok());
  EXPECT_EQ(Metric("stagger_authz_denied_total{cause=\"no_allow_rule\","
                   "service=\"stagger.v1.AgentSync\"}"),
            1);
}

// Another certificate with the agents role (a stolen one, or another
// node's) sends the same hello as a live agent: it is another agent. The
// live agent's stream is not ended, and its count sequence is its own: the
// intruder's reports 1..3 do not mark the live agent's report 2 as applied
// already (which, under one shared name, would drop it). Agents sharing
// one certificate (a DaemonSet's service account) keep apart by agent_id.
TEST_F(SecureServerTest, ACertificateCannotActAsAnotherCertificatesAgent) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  AgentStream live(Channel("agent"), "node-1");
  ASSERT_TRUE(live.Opened());
  AgentStream intruder(Channel("agent-b"), "node-1");
  ASSERT_TRUE(intruder.Opened());
  EXPECT_EQ(intruder.Counts(2), 2u);
  EXPECT_EQ(intruder.Counts(3), 3u);
  EXPECT_EQ(live.Counts(2), 2u) << "the live agent's own sequence";
  EXPECT_EQ(live.Counts(3), 3u);
  AgentStream neighbour(Channel("agent"), "node-2");  // same certificate
  ASSERT_TRUE(neighbour.Opened());
  EXPECT_EQ(neighbour.Counts(2), 2u);
  EXPECT_EQ(live.Counts(4), 4u);
  EXPECT_TRUE(live.End().ok());
  EXPECT_TRUE(intruder.End().ok());
  EXPECT_TRUE(neighbour.End().ok());
}

// An agent_id may name its certificate's principal ("<principal>|<name>");
// one that names another certificate's is refused, naming both.
TEST_F(SecureServerTest, AnAgentIdNamingAnotherCertificateIsRefused) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  AgentStream forged(Channel("agent"), "spiffe://stagger.test/agent-b|node-1");
  EXPECT_FALSE(forged.Opened());
  const grpc::Status refused = forged.End();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("hello.agent_id: \"spiffe://stagger.test/agent-b|"
                        "node-1\" names another identity than the peer's "
                        "certificate (spiffe://stagger.test/agent)"));
  AgentStream own(Channel("agent"), "spiffe://stagger.test/agent|node-1");
  ASSERT_TRUE(own.Opened());
  EXPECT_EQ(own.Counts(2), 2u);
  EXPECT_TRUE(own.End().ok());
}

// A hostile agent's count reports: one over the message's limits ends its
// stream with INVALID_ARGUMENT naming the limit; answers over a bucket's
// cap are cut and counted; other agents are unaffected.
TEST_F(SecureServerTest, HostileCountReportsAreRefusedOrCutByTheirLimits) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  AgentStream bystander(Channel("agent"), "node-0");
  ASSERT_TRUE(bystander.Opened());
  AgentStream wide(Channel("agent-b"), "node-1");
  ASSERT_TRUE(wide.Opened());
  const grpc::Status too_wide = wide.SendCounts(2, 10001, 1, 1);
  EXPECT_EQ(too_wide.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(too_wide.error_message(),
            "counts.endpoints: at most 10000, got 10001");
  AgentStream deep(Channel("agent-b"), "node-2");
  ASSERT_TRUE(deep.Opened());
  const grpc::Status too_deep = deep.SendCounts(2, 1, 65, 1);
  EXPECT_EQ(too_deep.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(too_deep.error_message(),
            "counts.endpoints[0].buckets: at most 64, got 65");
  AgentStream loud(Channel("agent-b"), "node-3");
  ASSERT_TRUE(loud.Opened());
  EXPECT_TRUE(loud.SendCounts(2, 1, 1, 1000000).ok()) << "cut, not refused";
  EXPECT_TRUE(PollUntil([&] {
    return Metric("stagger_sync_counts_dropped_total{cause=\"bucket_cap\"}") ==
           1;
  }));
  EXPECT_EQ(bystander.Counts(2), 2u);
  EXPECT_TRUE(loud.End().ok());
  EXPECT_TRUE(bystander.End().ok());
}

TEST_F(SecureServerTest, ServerOnlyTlsServesClientsThatTrustItsCa) {
  Start(TlsArgs(/*mutual=*/false, /*authz=*/false));
  EXPECT_TRUE(server_->WaitForOutput("gRPC port security: TLS"));
  EXPECT_TRUE(Admit(Channel("")).ok());
  EXPECT_EQ(Admit(Channel("plaintext")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A client that trusts another CA refuses this server.
  EXPECT_EQ(Admit(Channel("", "other-ca.pem")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecureServerTest, MutualTlsRefusesPlaintextNoCertificateAndOtherCa) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/false));
  EXPECT_TRUE(Admit(Channel("worker")).ok());
  EXPECT_EQ(Admit(Channel("plaintext")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Admit(Channel("")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Admit(Channel("rogue")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecureServerTest, PolicyGivesEachRoleItsMethodsAndCountsDenials) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  EXPECT_TRUE(server_->WaitForOutput("authz policy \"stagger-test\""));
  EXPECT_EQ(Metric(kDeniedCoordinator), 0);
  auto worker = Channel("worker");
  EXPECT_TRUE(Admit(worker).ok());
  const grpc::Status list = List(worker);
  EXPECT_EQ(list.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(list.error_message(), HasSubstr("spiffe://stagger.test/worker"));
  EXPECT_EQ(AdminCall(worker).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  auto reader = Channel("reader");
  EXPECT_TRUE(List(reader).ok());
  EXPECT_EQ(Admit(reader).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(AdminCall(reader).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  auto admin = Channel("admin");
  EXPECT_TRUE(List(admin).ok());
  EXPECT_TRUE(AdminCall(admin).ok());
  EXPECT_EQ(Admit(admin).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // The watch is the observers' (the admin is one); not the workers' nor
  // the readers' in this policy.
  EXPECT_TRUE(WatchCall(admin).ok());
  EXPECT_EQ(WatchCall(worker).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(WatchCall(reader).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(Metric(kDeniedCoordinator), 3);  // worker List, reader and admin Admit
  EXPECT_EQ(Metric(kDeniedAdmin), 2);        // worker and reader
  EXPECT_EQ(Metric("stagger_authz_denied_total{cause=\"no_allow_rule\","
                   "service=\"stagger.v1.EndpointWatch\"}"),
            2);
  // The metric's labels never carry request data: no endpoint key anywhere.
  auto scrape = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  ASSERT_EQ(scrape->status, 200);
  EXPECT_THAT(scrape->body, ::testing::Not(HasSubstr("hooks.example.com")));
  EXPECT_THAT(server_->output(), ::testing::Not(HasSubstr("hooks.example.com")));
}

// staggerctl with the admin's certificate pauses the endpoint; the worker's
// next Admit answers DEFER(PAUSED); a worker's certificate cannot pause
// (exit 4, PERMISSION_DENIED); the action is logged with the admin's
// identity and never with the key.
TEST_F(SecureServerTest, AdminPausesWithStaggerctlAndWorkersAreHeld) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  auto worker = Channel("worker");
  ASSERT_TRUE(Admit(worker).ok());
  auto ctl = [&](const std::string& who, const std::string& args,
                 std::string* out = nullptr) {
    const std::string cmd = absl::StrCat(
        STAGGERCTL_PATH, " --address=", server_->target(),
        " --tls_ca_file=", Cert("ca.pem"), " --tls_cert_file=", Cert(who + ".pem"),
        " --tls_key_file=", Cert(who + ".key"),
        " --tls_server_name=stagger.test ", args, " 2>&1");
    FILE* p = popen(cmd.c_str(), "r");
    std::string text;
    char buf[512];
    while (p != nullptr && fgets(buf, sizeof buf, p) != nullptr) text += buf;
    const int status = p == nullptr ? -1 : pclose(p);
    if (out != nullptr) *out = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  EXPECT_EQ(ctl("worker", "pause https://hooks.example.com/a --for 10m --reason x", &out), 4) << out;
  EXPECT_THAT(out, HasSubstr("PERMISSION_DENIED"));
  const size_t from = server_->output_size();
  ASSERT_EQ(ctl("admin", "pause https://hooks.example.com/a --for 10m --reason 'partner maintenance'", &out), 0) << out;

  v1::AdmitResponse resp;
  ASSERT_TRUE(Admit(worker, nullptr, &resp).ok());
  EXPECT_EQ(resp.decision().verdict(), v1::DEFER);
  EXPECT_EQ(resp.decision().reason(), v1::PAUSED);
  EXPECT_GE(resp.decision().defer_for().seconds(), 9 * 60);

  ASSERT_EQ(ctl("admin", "get https://hooks.example.com/a", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("partner maintenance"));
  EXPECT_THAT(out, HasSubstr("spiffe://stagger.test/admin"));
  ASSERT_EQ(ctl("admin", "list --state=PAUSED --json", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\"paused_by\": \"spiffe://stagger.test/admin\""));
  EXPECT_EQ(ctl("reader", "list --state=PAUSED", &out), 4) << out;
  EXPECT_EQ(ctl("reader", "get https://hooks.example.com/a", &out), 0) << out;

  ASSERT_EQ(ctl("admin", "resume https://hooks.example.com/a", &out), 0) << out;
  ASSERT_TRUE(Admit(worker, nullptr, &resp).ok());
  EXPECT_NE(resp.decision().reason(), v1::PAUSED);

  EXPECT_TRUE(server_->WaitForOutput(
      "admin: spiffe://stagger.test/admin paused endpoint key#", from));
  EXPECT_TRUE(server_->WaitForOutput(
      "admin: spiffe://stagger.test/admin resumed endpoint key#", from));
  EXPECT_THAT(server_->output(), ::testing::Not(HasSubstr("hooks.example.com")));
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"pause\"}"), 1);
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"resume\"}"), 1);

  // Disable and enable are Admin writes too: the admin's, not a reader's.
  EXPECT_EQ(ctl("reader", "disable https://hooks.example.com/a --reason x", &out), 4) << out;
  ASSERT_EQ(ctl("admin", "disable https://hooks.example.com/a --reason 'tenant gone'", &out), 0) << out;
  ASSERT_TRUE(Admit(worker, nullptr, &resp).ok());
  EXPECT_EQ(resp.decision().verdict(), v1::GIVE_UP);
  EXPECT_EQ(resp.decision().reason(), v1::ENDPOINT_DISABLED);
  ASSERT_EQ(ctl("admin", "enable https://hooks.example.com/a", &out), 0) << out;
  EXPECT_TRUE(server_->WaitForOutput(
      "admin: spiffe://stagger.test/admin disabled endpoint key#", from));
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"disable\"}"), 1);
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"enable\"}"), 1);

  // Force the breaker open: the worker is deferred by it; a reset forgets
  // it and the worker goes again.
  auto admin = v1::Admin::NewStub(Channel("admin"));
  v1::ForceBreakerRequest force;
  force.set_endpoint("https://hooks.example.com/a");
  force.set_state(v1::OPEN);
  force.mutable_open_for()->set_seconds(60);
  force.set_reason("drill");
  v1::ForceBreakerResponse forced;
  grpc::ClientContext fctx;
  ASSERT_TRUE(admin->ForceBreaker(&fctx, force, &forced).ok());
  EXPECT_EQ(forced.state().breaker_state(), v1::OPEN);
  ASSERT_TRUE(Admit(worker, nullptr, &resp).ok());
  EXPECT_EQ(resp.decision().reason(), v1::CIRCUIT_OPEN);
  ASSERT_EQ(ctl("admin", "reset https://hooks.example.com/a --reason drill-over", &out), 0) << out;
  ASSERT_TRUE(Admit(worker, nullptr, &resp).ok());
  EXPECT_EQ(resp.decision().verdict(), v1::PROCEED);
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"force_breaker\"}"), 1);
  EXPECT_EQ(Metric("stagger_admin_actions_total{action=\"reset\"}"), 1);
  EXPECT_THAT(server_->output(), ::testing::Not(HasSubstr("hooks.example.com")));
}

// The example worker over mutual TLS with the worker's certificate: its
// decisions come from the coordinator. With a --tls_server_name the
// server's certificate does not carry, the handshake fails and every
// decision is the local fallback's: the option reaches the channel.
TEST_F(SecureServerTest, ExampleWorkerTakesTheTlsFlags) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  auto run = [&](const std::string& server_name, absl::string_view extra) {
    const std::string cmd = absl::StrCat(
        EXAMPLE_WORKER_PATH, " ", extra, " --coordinator=", server_->target(),
        " --tls_ca_file=", Cert("ca.pem"), " --tls_cert_file=", Cert("worker.pem"),
        " --tls_key_file=", Cert("worker.key"), " --tls_server_name=", server_name,
        " --endpoint='https://bot:secret@hooks.example.com/orders/T0?sig=1'",
        " --deliveries=20 --workers=4 --arrival_seconds=1 --outage_seconds=0",
        " --rate_limit_at=1000 --max_run_seconds=30 --quiet 2>&1");
    FILE* p = popen(cmd.c_str(), "r");
    std::string text;
    char buf[512];
    while (p != nullptr && fgets(buf, sizeof buf, p) != nullptr) text += buf;
    if (p != nullptr) pclose(p);
    return text;
  };
  // A 2 s deadline per call: a sanitizer's slowdown on a loaded machine
  // (13 of 42 calls past the default 50 ms, once, under ThreadSanitizer)
  // must not turn the coordinator's answers into the fallback's.
  const std::string good = run("stagger.test", "--deadline_ms=2000");
  EXPECT_THAT(good, HasSubstr("deliveries: 20 (SUCCEEDED 20;"));
  // The coordinator's, but for a rare call slower still.
  std::smatch by_source;
  ASSERT_TRUE(std::regex_search(
      good, by_source,
      std::regex("decisions by source: coordinator ([0-9]+)(, local ([0-9]+))?")))
      << good;
  const int local = by_source[3].matched ? std::stoi(by_source[3]) : 0;
  EXPECT_GE(std::stoi(by_source[1]), 20) << good;
  EXPECT_LE(local, 4) << good;
  // The key it sent is the URL without its secrets.
  EXPECT_THAT(good, HasSubstr("to https://hooks.example.com/orders;"));
  EXPECT_THAT(good, ::testing::Not(HasSubstr("secret")));
  const std::string wrong = run("not-in-the-certificate.test", "");
  EXPECT_THAT(wrong, HasSubstr("decisions by source: local "));
  EXPECT_THAT(wrong, ::testing::Not(HasSubstr("source: coordinator")));
}

TEST_F(SecureServerTest, PolicyChangeTakesEffectAndABadOneIsRefusedAndCounted) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  auto worker = Channel("worker");
  ASSERT_EQ(List(worker).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Let workers list too: a new file renamed over the old one.
  std::string policy = ReadFile(policy_path());
  const std::string readers = R"("principals": ["reader.stagger.test",)";
  ASSERT_NE(policy.find(readers), std::string::npos);
  policy.replace(policy.find(readers), readers.size(),
                 R"("principals": ["spiffe://stagger.test/worker", "reader.stagger.test",)");
  ASSERT_TRUE(ReplaceFile(policy_path(), policy));
  EXPECT_TRUE(PollUntil([&] { return List(worker).ok(); }));
  EXPECT_TRUE(PollUntil([&] {
    return Metric("stagger_authz_policy_reloads_total{result=\"success\"}") == 1;
  }));

  // A bad file: refused, the policy in force stays, the failure counted.
  const size_t from = server_->output_size();
  ASSERT_TRUE(WriteFile(policy_path(), R"({"name": "x", "allow_rules": [{"nmae": "typo"}]})"));
  EXPECT_TRUE(PollUntil([&] {
    return Metric("stagger_authz_policy_reloads_total{result=\"failure\"}") == 1;
  }));
  EXPECT_TRUE(server_->WaitForOutput("allow_rules[0]: unknown field \"nmae\"", from));
  EXPECT_TRUE(List(worker).ok());
  EXPECT_TRUE(Admit(worker).ok());
}

TEST_F(SecureServerTest, RotatedCertificateIsUsedByNewConnectionsOnly) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  auto established = Channel("worker");
  std::string cn;
  ASSERT_TRUE(Admit(established, &cn).ok());
  ASSERT_EQ(cn, "staggerd-v1");

  ASSERT_TRUE(PutSecret(Cert("server-v2.pem"), Cert("server-v2.key")));
  // New connections see the new certificate once gRPC re-reads the files.
  EXPECT_TRUE(PollUntil([&] {
    std::string now;
    return Admit(Channel("worker"), &now).ok() && now == "staggerd-v2";
  }));
  // The established connection was not dropped: same handshake, still
  // answering.
  std::string still;
  EXPECT_TRUE(Admit(established, &still).ok());
  EXPECT_EQ(still, "staggerd-v1");
}

// Outside Kubernetes (certbot, a deploy script): plain files, each new one
// written beside the old and renamed over it.
TEST_F(SecureServerTest, CertificateRenamedOverThePlainFileIsPickedUp) {
  const std::string dir = dir_ / "plain";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string cert = dir + "/tls.crt", key = dir + "/tls.key";
  ASSERT_TRUE(WriteFile(cert, ReadFile(Cert("server.pem"))));
  ASSERT_TRUE(WriteFile(key, ReadFile(Cert("server.key"))));
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true, cert, key));
  std::string cn;
  ASSERT_TRUE(Admit(Channel("worker"), &cn).ok());
  ASSERT_EQ(cn, "staggerd-v1");

  for (const auto& [from, to] : {std::pair{Cert("server-v2.key"), key},
                                 std::pair{Cert("server-v2.pem"), cert}}) {
    ASSERT_TRUE(ReplaceFile(to, ReadFile(from))) << to;
  }
  EXPECT_TRUE(PollUntil([&] {
    std::string now;
    return Admit(Channel("worker"), &now).ok() && now == "staggerd-v2";
  })) << server_->output();
}

// Two replicas sharing one server certificate (as a StatefulSet's pods
// share one Secret), each with mutual TLS and the policy: a worker's client
// given both replicas and its certificate reaches each, and every key is
// decided on its owner.
TEST_F(SecureServerTest, TwoReplicasUnderMutualTlsDecideEachKeyOnItsOwner) {
  std::unique_ptr<StaggerdProcess> replicas[2];
  std::vector<std::string> members;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = TlsArgs(/*mutual=*/true, /*authz=*/true);
    args.push_back("--replicas=stagger-0,stagger-1");
    args.push_back(absl::StrCat("--replica_name=stagger-", i));
    auto p = StaggerdProcess::Start(STAGGERD_PATH, std::move(args));
    ASSERT_TRUE(p.ok()) << p.status();
    replicas[i] = *std::move(p);
    members.push_back(absl::StrCat("stagger-", i, "=", replicas[i]->target()));
  }
  client::ClientTlsOptions tls;
  tls.ca_file = Cert("ca.pem");
  tls.cert_file = Cert("worker.pem");
  tls.key_file = Cert("worker.key");
  tls.server_name = "stagger.test";
  auto credentials = client::MakeChannelCredentials(tls);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  client::ClientOptions options;
  options.target = absl::StrJoin(members, ",");
  options.credentials = *credentials;
  options.tls_server_name = tls.server_name;
  options.call_deadline = absl::Seconds(5);
  auto c = client::CoordinatorClient::Create(options);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->WaitForCoordinator(absl::Seconds(10));

  int owned[2] = {0, 0};
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("https://tenant-", k, ".example/hook");
    absl::StatusOr<client::ClientDecision> d =
        (*c)->Admit(stagger::testing::AdmitOf(key, 1));
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->source, client::DecisionSource::kCoordinator)
        << key << ": " << d->fallback_cause;
    ++owned[(*c)->OwnerOf(key).name.back() - '0'];
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_GT(owned[i], 0) << "stagger-" << i << " owns none of 200 keys";
    EXPECT_EQ(ScrapeMetric(replicas[i]->metrics_port(), "stagger_endpoints_tracked"),
              owned[i])
        << "stagger-" << i;
    EXPECT_EQ(ScrapeMetric(replicas[i]->metrics_port(),
                           "stagger_misrouted_requests_total"),
              0)
        << "stagger-" << i;
  }
}

TEST_F(SecureServerTest, HealthPortServesHealthAloneInPlaintext) {
  Start(TlsArgs(/*mutual=*/true, /*authz=*/true));
  ASSERT_TRUE(server_->WaitForOutput("health on port "));
  const std::string out = server_->output();
  const size_t at = out.find("health on port ") + 15;
  const int health_port = std::atoi(out.c_str() + at);
  ASSERT_GT(health_port, 0);
  auto plain = grpc::CreateChannel(absl::StrCat("127.0.0.1:", health_port),
                                   grpc::InsecureChannelCredentials());
  // The kubelet's check: grpc.health.v1.Health/Check for "", plaintext.
  for (const char* service : {"", "stagger.v1.RetryCoordinator"}) {
    auto stub = grpc::health::v1::Health::NewStub(plain);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ASSERT_TRUE(stub->Check(&ctx, req, &resp).ok()) << service;
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  // Nothing else answers there: not the coordinator, not the admin service.
  EXPECT_EQ(Admit(plain).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(List(plain).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(AdminCall(plain).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // SIGTERM: the health port turns NOT_SERVING with the main one.
  server_->Signal(SIGTERM);
  EXPECT_TRUE(PollUntil([&] {
    auto stub = grpc::health::v1::Health::NewStub(plain);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    grpc::Status s = stub->Check(&ctx, {}, &resp);
    return !s.ok() ||
           resp.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  }));
  auto code = server_->WaitForExit();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

struct RefusalCase {
  const char* what;
  std::vector<std::string> args;  // {DIR} is the cert folder
  const char* message;
};

TEST_F(SecureServerTest, RefusesToStartOnBadSecuritySettings) {
  const std::string c = dir_ / "certs/";
  ASSERT_TRUE(WriteFile(dir_ / "bad-policy.json", R"({"name": "p"})"));
  const std::vector<RefusalCase> cases = {
      {"a policy without client certificates",
       {"--tls_cert_file=" + c + "server.pem", "--tls_key_file=" + c + "server.key",
        "--authz_policy_file=" + policy_path()},
       "needs client certificates"},
      {"a policy on plaintext", {"--authz_policy_file=" + policy_path()},
       "needs client certificates"},
      {"a key that is not the certificate's",
       {"--tls_cert_file=" + c + "server.pem", "--tls_key_file=" + c + "worker.key"},
       "does not belong to the certificate"},
      {"a missing certificate file",
       {"--tls_cert_file=" + c + "nope.pem", "--tls_key_file=" + c + "server.key"},
       "nope.pem: cannot be read"},
      {"a key file that is not PEM",
       {"--tls_cert_file=" + c + "server.pem", "--tls_key_file=" + policy_path()},
       "not a PEM file"},
      {"a certificate without its key", {"--tls_cert_file=" + c + "server.pem"},
       "both --tls_cert_file and --tls_key_file"},
      {"a client CA without TLS", {"--tls_client_ca_file=" + c + "ca.pem"},
       "--tls_client_ca_file needs --tls_cert_file"},
      {"a bad policy file",
       {"--tls_cert_file=" + c + "server.pem", "--tls_key_file=" + c + "server.key",
        "--tls_client_ca_file=" + c + "ca.pem",
        "--authz_policy_file=" + (dir_ / "bad-policy.json")},
       "allow_rules: is required"},
  };
  for (const RefusalCase& rc : cases) {
    std::vector<std::string> args = {"--address=127.0.0.1:0",
                                     "--metrics_address="};
    args.insert(args.end(), rc.args.begin(), rc.args.end());
    auto p = StaggerdProcess::Spawn(STAGGERD_PATH, args);
    ASSERT_TRUE(p.ok()) << p.status();
    auto code = (*p)->WaitForExit();
    ASSERT_TRUE(code.ok()) << rc.what << ": " << code.status();
    EXPECT_EQ(*code, 2) << rc.what;
    EXPECT_THAT((*p)->output(), HasSubstr("refusing to start")) << rc.what;
    EXPECT_THAT((*p)->output(), HasSubstr(rc.message)) << rc.what;
  }
}

}  // namespace
}  // namespace stagger
