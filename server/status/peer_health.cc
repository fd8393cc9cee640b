#include "server/status/peer_health.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace stagger::status {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

absl::Status Refuse(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("status_peers: ", what));
}

}  // namespace

// A peer this replica asks (it has an address), or only shows.
struct PeerHealth::Peer {
  size_t index;  // in statuses_
  std::unique_ptr<grpc::health::v1::Health::Stub> stub;  // null: no address
};

absl::StatusOr<std::map<std::string, std::string>> ParseStatusPeers(
    absl::string_view flag_value, const std::vector<std::string>& members,
    absl::string_view self) {
  std::map<std::string, std::string> out;
  for (absl::string_view piece :
       absl::StrSplit(flag_value, ',', absl::SkipEmpty())) {
    const size_t eq = piece.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == piece.size()) {
      return Refuse(absl::StrCat("want name=host:port, got \"", piece, "\""));
    }
    const std::string name(piece.substr(0, eq));
    if (std::find(members.begin(), members.end(), name) == members.end()) {
      return Refuse(absl::StrCat("\"", name, "\" is not in --replicas"));
    }
    if (name == self) {
      return Refuse(absl::StrCat("\"", name, "\" is this replica"));
    }
    if (!out.emplace(name, std::string(piece.substr(eq + 1))).second) {
      return Refuse(absl::StrCat("\"", name, "\" given twice"));
    }
  }
  return out;
}

PeerHealth::PeerHealth(std::vector<std::string> members, std::string self,
                       std::map<std::string, std::string> addresses) {
  if (members.empty()) members.push_back(self);
  for (std::string& name : members) {
    PeerStatus s;
    s.self = name == self;
    auto it = addresses.find(name);
    if (s.self) {
      s.health = "SERVING";
      s.detail = "this replica";
    } else if (it == addresses.end()) {
      s.detail = "no address: give one with --status_peers";
    } else {
      s.address = it->second;
      s.detail = "not checked yet";
      peers_.push_back(std::make_unique<Peer>(Peer{
          statuses_.size(),
          grpc::health::v1::Health::NewStub(grpc::CreateChannel(
              s.address, grpc::InsecureChannelCredentials()))}));
    }
    s.name = std::move(name);
    statuses_.push_back(std::move(s));
  }
}

PeerHealth::~PeerHealth() { Stop(); }

void PeerHealth::Start() {
  if (peers_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    do {
      CheckOnce();
    } while (!stop_.WaitForNotificationWithTimeout(kInterval));
  });
}

void PeerHealth::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void PeerHealth::CheckOnce() {
  for (const std::unique_ptr<Peer>& peer : peers_) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kDeadline));
    HealthCheckRequest req;  // service "": the server as a whole
    HealthCheckResponse resp;
    const grpc::Status s = peer->stub->Check(&ctx, req, &resp);
    absl::MutexLock lock(&mu_);
    PeerStatus& st = statuses_[peer->index];
    st.checked_at = absl::Now();
    if (s.ok()) {
      st.health = HealthCheckResponse::ServingStatus_Name(resp.status());
      st.detail = "";
    } else {
      st.health = "UNREACHABLE";
      st.detail = absl::StrCat("gRPC code ", s.error_code(), ": ",
                               s.error_message());
    }
  }
}

std::vector<PeerStatus> PeerHealth::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return statuses_;
}

}  // namespace stagger::status
