// staggerctl: the operator's command line for staggerd (see commands.h for
// the commands and exit codes, docs/SECURITY.md for TLS).
//
//   staggerctl --address stagger:50051 --tls_ca_file ca.pem
//     --tls_cert_file admin.pem --tls_key_file admin.key
//     pause --prefix https://partner.example/ --for 30m --reason "maintenance"
//   (one command line)
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/tls_options.h"
#include "core/cli/blocked_signals.h"
#include "staggerctl/args.h"
#include "staggerctl/commands.h"
#include "staggerctl/fan_out.h"
#include "staggerctl/grpc_shutdown.h"
#include "staggerctl/watch_command.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "staggerd gRPC address, or every replica's, comma-separated");
ABSL_FLAG(std::string, tls_ca_file, "", "CA of staggerd's certificate (TLS)");
ABSL_FLAG(std::string, tls_cert_file, "", "client certificate (mutual TLS)");
ABSL_FLAG(std::string, tls_key_file, "", "client key (mutual TLS)");
ABSL_FLAG(std::string, tls_server_name, "",
          "name to expect in staggerd's certificate");
ABSL_FLAG(bool, json, false, "print JSON instead of a table");
ABSL_FLAG(std::string, state, "",
          "list: OPEN, HALF_OPEN, CLOSED, PAUSED or DISABLED");
ABSL_FLAG(std::string, prefix, "", "pause/resume/watch: a key prefix");
ABSL_FLAG(absl::Duration, for, absl::ZeroDuration(), "pause: how long");
ABSL_FLAG(std::string, reason, "",
          "pause/reset/disable/enable: why (logged, shown)");
ABSL_FLAG(std::string, kinds, "", "watch: only these event kinds, K,...");
ABSL_FLAG(bool, history, false,
          "watch: start with the history each replica holds");
ABSL_FLAG(std::string, resume_file, "",
          "watch: each replica's resume token, read at start, written as "
          "events come");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "deadline of each call");
ABSL_FLAG(int, limit, 10000, "list: at most this many endpoints");

namespace {

// `staggerctl watch`: every replica at once, until a signal.
int Watch(const std::vector<std::string>& args,
          const stagger::staggerctl::CommandOptions& options,
          const stagger::client::ClientTlsOptions& tls) {
  namespace ctl = stagger::staggerctl;
  stagger::cli::BlockHandledSignals();  // taken by sigwait; no thread yet
  auto creds = stagger::client::MakeChannelCredentials(tls);
  if (!creds.ok()) {
    std::cerr << "staggerctl: " << creds.status().message() << "\n";
    return ctl::kUsage;
  }
  const ctl::WatchFlags w{absl::GetFlag(FLAGS_kinds),
                          absl::GetFlag(FLAGS_history),
                          absl::GetFlag(FLAGS_resume_file)};
  const int code = ctl::RunWatch(args, options, w, *std::move(creds),
                                 tls.server_name, std::cout, std::cerr);
  ctl::WaitForGrpcShutdown(absl::Seconds(2));
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  namespace ctl = stagger::staggerctl;
  absl::StatusOr<ctl::Positional> parsed = ctl::ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "staggerctl: " << parsed.status().message() << "\n";
    return ctl::kUsage;
  }
  if (parsed->help) {
    std::cout << ctl::Usage();
    return ctl::kOk;
  }
  if (parsed->helpfull) {  // Abseil prints every flag, then exits 1
    absl::SetProgramUsageMessage(ctl::Usage());
    char helpfull[] = "--helpfull";
    char* full[] = {argv[0], helpfull};
    absl::ParseCommandLine(2, full);
  }
  stagger::client::ClientTlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  ctl::CommandOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.json = absl::GetFlag(FLAGS_json);
  options.state = absl::GetFlag(FLAGS_state);
  options.prefix = absl::GetFlag(FLAGS_prefix);
  options.pause_for = absl::GetFlag(FLAGS_for);
  options.reason = absl::GetFlag(FLAGS_reason);
  options.limit = absl::GetFlag(FLAGS_limit);
  if (options.timeout <= absl::ZeroDuration() || options.limit < 1) {
    std::cerr << "staggerctl: --timeout and --limit must be > 0\n";
    return ctl::kUsage;
  }
  // One id for this command on every replica (admin.proto's operation_id).
  absl::BitGen gen;
  options.operation_id =
      absl::StrFormat("ctl-%016x", absl::Uniform<uint64_t>(gen));
  if (!parsed->args.empty() && parsed->args[0] == "watch") {
    return Watch(parsed->args, options, tls);
  }
  const int code = ctl::RunOnEachAddress(
      parsed->args, options,
      [&tls](const std::string& address) {
        return stagger::client::MakeChannel(address, tls);
      },
      std::cout, std::cerr);
  // Every channel is gone; let gRPC finish its clean-up before exiting.
  ctl::WaitForGrpcShutdown(absl::Seconds(2));
  return code;
}
