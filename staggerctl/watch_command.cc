#include "staggerctl/watch_command.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/watch.h"
#include "core/cli/blocked_signals.h"

namespace stagger::staggerctl {
namespace {

std::string When(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

// `k=v` when v is set.
void Field(std::string* line, absl::string_view k, const std::string& v) {
  if (!v.empty()) absl::StrAppend(line, " ", k, "=", v);
}

std::string Line(const client::WatchEvent& e) {
  std::string line = absl::StrCat(When(e.at), " ", e.replica, " #", e.sequence,
                                  " ", client::EventKindName(e.kind), " ");
  absl::StrAppend(&line, e.endpoint.empty() ? absl::StrCat("prefix ", e.prefix,
                                                           "*")
                                            : e.endpoint);
  Field(&line, "cause", e.open_cause);
  if (e.open_until != absl::InfinitePast()) {
    Field(&line, "until", When(e.open_until));
  }
  if (e.retry_after_until != absl::InfinitePast()) {
    Field(&line, "until", When(e.retry_after_until));
  }
  if (e.kind == client::EventKind::kReleaseStarted ||
      e.kind == client::EventKind::kReleaseFinished) {
    absl::StrAppend(&line, " pace=", e.release_pace, "/s");
  }
  if (e.kind == client::EventKind::kPaused) {
    Field(&line, "until", When(e.pause_until));
  }
  Field(&line, "trigger", e.disable_trigger);
  if (!e.reason.empty()) absl::StrAppend(&line, " reason=\"", e.reason, "\"");
  Field(&line, "by", e.by);
  Field(&line, "op", e.operation_id);
  if (e.ran_out) absl::StrAppend(&line, " ran_out");
  if (e.forgotten) absl::StrAppend(&line, " forgotten");
  return line;
}

std::string NoticeLine(const client::WatchNotice& n) {
  std::string line = absl::StrCat("staggerctl watch: ", n.member, " (",
                                  n.target, "): ",
                                  client::WatchNoticeKindName(n.kind));
  switch (n.kind) {
    case client::WatchNotice::Kind::kConnected:
      absl::StrAppend(&line, ", incarnation ", n.incarnation);
      break;
    case client::WatchNotice::Kind::kResync:
      absl::StrAppend(&line, " ", n.detail);
      if (n.missed_from != 0) {
        absl::StrAppend(&line, ": events ", n.missed_from, "..", n.missed_to,
                        " missed");
      } else {
        absl::StrAppend(&line, ": events before the restart are lost");
      }
      break;
    case client::WatchNotice::Kind::kDisconnected:
      absl::StrAppend(&line, ": ", n.detail, " (retrying)");
      break;
  }
  return line;
}

absl::StatusOr<std::map<std::string, std::string>> ReadTokens(
    const std::string& path) {
  std::map<std::string, std::string> tokens;
  std::ifstream in(path);
  if (!in.good()) return tokens;  // none yet: a first run
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.empty()) continue;
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume_file=", path, ": want \"NAME TOKEN\" lines, got \"",
          line.substr(0, 80), "\""));
    }
    tokens[parts[0]] = parts[1];
  }
  return tokens;
}

// Written whole to PATH.tmp, then renamed over PATH.
void WriteTokens(const std::string& path,
                 const std::map<std::string, std::string>& tokens) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [name, token] : tokens) out << name << " " << token << "\n";
    if (!out.good()) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

// The watcher's options from the flags; InvalidArgument naming the flag.
absl::StatusOr<client::WatchOptions> OptionsOf(const CommandOptions& o,
                                               const WatchFlags& w) {
  client::WatchOptions wo;
  wo.target = o.address;
  wo.prefix = o.prefix;
  wo.replay_history = w.history;
  for (absl::string_view k : absl::StrSplit(w.kinds, ',', absl::SkipEmpty())) {
    std::optional<client::EventKind> kind =
        client::ParseEventKind(absl::StripAsciiWhitespace(k));
    if (!kind.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kinds: unknown kind \"", k, "\""));
    }
    wo.kinds.push_back(*kind);
  }
  if (!w.resume_file.empty()) {
    auto tokens = ReadTokens(w.resume_file);
    if (!tokens.ok()) return tokens.status();
    wo.resume_tokens = *std::move(tokens);
  }
  return wo;
}

}  // namespace

int RunWatch(const std::vector<std::string>& args, const CommandOptions& o,
             const WatchFlags& w,
             std::shared_ptr<grpc::ChannelCredentials> credentials,
             const std::string& tls_server_name, std::ostream& out,
             std::ostream& err) {
  if (args.size() != 1) {
    err << "staggerctl: watch takes no operands (staggerctl --help)\n";
    return kUsage;
  }
  absl::StatusOr<client::WatchOptions> wo = OptionsOf(o, w);
  if (!wo.ok()) {
    err << "staggerctl: " << wo.status().message() << "\n";
    return kUsage;
  }
  wo->credentials = std::move(credentials);
  wo->tls_server_name = tls_server_name;
  absl::Mutex out_mu;
  auto watcher = client::Watcher::Start(
      *std::move(wo),
      [&](const client::WatchEvent& e) {
        absl::MutexLock l(&out_mu);
        out << (o.json ? e.json : Line(e)) << std::endl;
      },
      [&](const client::WatchNotice& n) {
        absl::MutexLock l(&out_mu);
        err << NoticeLine(n) << std::endl;
      });
  if (!watcher.ok()) {
    err << "staggerctl: --address: " << watcher.status().message() << "\n";
    return kUsage;
  }
  absl::Notification done;
  std::thread saver;
  if (!w.resume_file.empty()) {
    saver = std::thread([&] {
      while (!done.WaitForNotificationWithTimeout(absl::Seconds(1))) {
        WriteTokens(w.resume_file, (*watcher)->resume_tokens());
      }
    });
  }
  cli::WaitForShutdownSignal(nullptr);
  (*watcher)->Stop();
  done.Notify();
  if (saver.joinable()) saver.join();
  if (!w.resume_file.empty()) {
    WriteTokens(w.resume_file, (*watcher)->resume_tokens());
  }
  return kOk;
}

}  // namespace stagger::staggerctl
