// AgentFlags: what stagger-agent's command line asks for, checked before
// anything starts (every refusal names its flag; the agent then exits 2),
// and the CoordinatorClient options it makes from them.
//
//   --listen            unix:/path (default unix:/run/stagger/agent.sock: a
//                       node's workers share one socket) or host:port.
//   --coordinator       the coordinator replicas, in the C++ client's forms
//                       (client/coordinator_target.h).
//   --status_address    optional: host:port of the read-only status page
//                       (agent/status/agent_status_page.h); empty: none.
//   --config            optional: a staggerd config file whose policies and
//                       limits the agent's fallback decides with (keep it
//                       the coordinators'); embedded defaults without it.
//   TLS flags as the client tools': --tls_ca_file, --tls_cert_file,
//   --tls_key_file, --tls_server_name.
// The rest are documented on their ABSL_FLAG lines (agent_flags.cc) and in
// `stagger-agent --help`.
#ifndef STAGGER_AGENT_AGENT_FLAGS_H_
#define STAGGER_AGENT_AGENT_FLAGS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "client/coordinator_client.h"
#include "client/tls_options.h"

namespace stagger::agent {

struct AgentFlags {
  std::string listen;
  std::string metrics_address;  // "" = no metrics
  std::string status_address;   // "" = no status page (agent/status/)
  client::ClientOptions client;
  client::ClientTlsOptions tls;
  int threads = 16;
  size_t max_queued_calls = 10000;
  int64_t max_waiting_calls = 10000;
  absl::Duration drain_timeout;
};

// Ranges, checked by ReadAgentFlags.
inline constexpr int kMaxThreads = 1024;
inline constexpr size_t kMaxQueuedCalls = 1000000;
inline constexpr int64_t kMaxWaitingCalls = 1000000;

absl::StatusOr<AgentFlags> ReadAgentFlags();

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_AGENT_FLAGS_H_
