#include "staggerctl/commands.h"

#include <algorithm>
#include <functional>
#include <ostream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/http/json.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/client_context.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::staggerctl {
namespace {

using google::protobuf::util::TimeUtil;

// One call's outcome as an exit code and a printed message.
int Fail(const grpc::Status& s, const CommandOptions& o, absl::string_view cmd,
         std::ostream& err) {
  int code = kError;
  std::string hint;
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = kUnreachable;
      hint = absl::StrCat(" (cannot reach staggerd at ", o.address,
                          ": is it running, and do the --tls_* flags match "
                          "its TLS settings?)");
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      code = kDenied;
      hint = " (the authorization policy does not allow this call for the "
             "identity in --tls_cert_file)";
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = kNotFound;
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = kInvalid;
      break;
    default:
      break;
  }
  // gRPC's codes are the canonical codes, number for number; Abseil names
  // them (and says UNKNOWN for a number it does not know).
  err << "staggerctl " << cmd << ": "
      << absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()))
      << ": " << s.error_message() << hint << "\n";
  return code;
}

int Usage(std::ostream& err, absl::string_view what) {
  err << "staggerctl: " << what << " (staggerctl --help)\n";
  return kUsage;
}

void Prepare(grpc::ClientContext* ctx, const CommandOptions& o) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + o.timeout));
}

// The JSON the status page serves too (core/http/json.h): proto field
// names, every field.
std::string Json(const google::protobuf::Message& m) {
  return http::ProtoJson(m, /*indent=*/true);
}

std::string When(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return TimeUtil::ToString(t);
}

std::string In(const google::protobuf::Timestamp& t, absl::Time now) {
  const absl::Time at = absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
  if (at <= now) return "-";
  return absl::FormatDuration(absl::Trunc(at - now, absl::Seconds(1)));
}

// Left-aligned columns, two spaces apart.
void PrintTable(const std::vector<std::vector<std::string>>& rows,
                std::ostream& out) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      absl::StrAppend(&line, r[i]);
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string PauseText(const v1::EndpointState& s, absl::Time now) {
  if (!s.has_pause()) return "-";
  return absl::StrCat(In(s.pause().until(), now), " (", s.pause().reason(), ")");
}

// "OPERATOR", "UNAVAILABLE", "PERMANENT_FAILURES".
std::string TriggerName(v1::DisableTrigger t) {
  const std::string name = v1::DisableTrigger_Name(t);
  const std::string prefix = "DISABLE_TRIGGER_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::string DisabledText(const v1::EndpointState& s) {
  if (!s.has_disabled()) return "-";
  return absl::StrCat(TriggerName(s.disabled().trigger()), " (",
                      s.disabled().reason(), ")");
}

std::vector<std::string> EndpointRow(const v1::EndpointState& s, absl::Time now) {
  return {s.endpoint(),
          v1::BreakerState_Name(s.breaker_state()),
          s.policy(),
          absl::StrCat(s.consecutive_failures()),
          s.has_retry_after_until() ? In(s.retry_after_until(), now) : "-",
          PauseText(s, now),
          DisabledText(s),
          When(s.last_seen())};
}

const std::vector<std::string> kEndpointHeader = {
    "ENDPOINT", "BREAKER", "POLICY", "FAILURES", "RETRY-AFTER", "PAUSED",
    "DISABLED", "LAST-SEEN"};

void PrintDisabled(const v1::ListDisabledResponse& r, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {
      {"ENDPOINT", "TRIGGER", "SINCE", "REASON", "BY"}};
  for (const v1::DisabledEndpoint& d : r.endpoints()) {
    rows.push_back({d.endpoint(), TriggerName(d.disabled().trigger()),
                    When(d.disabled().since()), d.disabled().reason(),
                    d.disabled().disabled_by().empty()
                        ? "-"
                        : d.disabled().disabled_by()});
  }
  PrintTable(rows, out);
}

std::string Target(const v1::PauseTarget& t) {
  return t.has_prefix() ? t.prefix() + "*" : t.endpoint();
}

void PrintPauses(const v1::ListPausesResponse& r, std::ostream& out) {
  const absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows = {
      {"TARGET", "KIND", "REMAINING", "UNTIL", "REASON", "BY"}};
  for (const v1::Pause& p : r.pauses()) {
    rows.push_back({Target(p.target()),
                    p.target().has_prefix() ? "prefix" : "endpoint",
                    In(p.until(), now), When(p.until()), p.reason(),
                    p.paused_by()});
  }
  PrintTable(rows, out);
}

// Every page of ListEndpoints (up to o.limit rows) with `filter`.
grpc::Status ListAll(v1::RetryCoordinator::Stub& stub, v1::BreakerState filter,
                     const CommandOptions& o, v1::ListEndpointsResponse* all) {
  std::string token;
  do {
    v1::ListEndpointsRequest req;
    req.set_page_size(1000);
    req.set_page_token(token);
    req.set_breaker_state(filter);
    v1::ListEndpointsResponse page;
    grpc::ClientContext ctx;
    Prepare(&ctx, o);
    grpc::Status s = stub.ListEndpoints(&ctx, req, &page);
    if (!s.ok()) return s;
    for (auto& e : *page.mutable_endpoints()) {
      if (all->endpoints_size() >= o.limit) break;
      *all->add_endpoints() = std::move(e);
    }
    all->set_total_tracked(page.total_tracked());
    token = page.next_page_token();
  } while (!token.empty() && all->endpoints_size() < o.limit);
  return grpc::Status::OK;
}

struct Env {
  const CommandOptions& o;
  std::shared_ptr<grpc::Channel> channel;
  std::ostream& out;
  std::ostream& err;
};

int Status(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 1) return Usage(e.err, "status takes no operands");
  auto stub = v1::RetryCoordinator::NewStub(e.channel);
  v1::ListEndpointsResponse open, half;
  CommandOptions counting = e.o;
  counting.limit = 1000000;
  if (grpc::Status s = ListAll(*stub, v1::OPEN, counting, &open); !s.ok()) {
    return Fail(s, e.o, "status", e.err);
  }
  if (grpc::Status s = ListAll(*stub, v1::HALF_OPEN, counting, &half); !s.ok()) {
    return Fail(s, e.o, "status", e.err);
  }
  // Pauses need the Admin service; a reader may not be allowed it.
  auto admin = v1::Admin::NewStub(e.channel);
  v1::ListPausesResponse pauses;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  const grpc::Status ps = admin->ListPauses(&ctx, {}, &pauses);
  v1::ListDisabledResponse disabled;
  grpc::ClientContext dctx;
  Prepare(&dctx, e.o);
  const grpc::Status ds = admin->ListDisabled(&dctx, {}, &disabled);
  const std::string disabled_count =
      ds.ok() ? absl::StrCat(disabled.endpoints_size()) : "unknown";
  const std::string paused =
      ps.ok() ? absl::StrCat(pauses.pauses_size())
              : absl::StrCat("unknown (ListPauses: ", ps.error_message().empty()
                                                          ? absl::StrCat("code ", ps.error_code())
                                                          : ps.error_message(),
                             ")");
  if (e.o.json) {
    e.out << absl::StrFormat(
        "{\n  \"address\": \"%s\",\n  \"tracked\": %d,\n  \"open\": %d,\n  "
        "\"half_open\": %d,\n  \"pauses\": %s,\n  \"disabled\": %s\n}\n",
        e.o.address, open.total_tracked(), open.endpoints_size(),
        half.endpoints_size(), ps.ok() ? paused : "null",
        ds.ok() ? disabled_count : "null");
    return kOk;
  }
  PrintTable({{"staggerd", e.o.address},
              {"tracked endpoints", absl::StrCat(open.total_tracked())},
              {"breakers OPEN", absl::StrCat(open.endpoints_size())},
              {"breakers HALF_OPEN", absl::StrCat(half.endpoints_size())},
              {"pauses in force", paused},
              {"disabled endpoints", disabled_count}},
             e.out);
  return kOk;
}

int List(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 1) return Usage(e.err, "list takes no operands");
  if (e.o.state == "PAUSED") {
    auto admin = v1::Admin::NewStub(e.channel);
    v1::ListPausesResponse r;
    grpc::ClientContext ctx;
    Prepare(&ctx, e.o);
    if (grpc::Status s = admin->ListPauses(&ctx, {}, &r); !s.ok()) {
      return Fail(s, e.o, "list", e.err);
    }
    if (e.o.json) {
      e.out << Json(r);
    } else {
      PrintPauses(r, e.out);
    }
    return kOk;
  }
  if (e.o.state == "DISABLED") {
    auto admin = v1::Admin::NewStub(e.channel);
    v1::ListDisabledResponse r;
    grpc::ClientContext ctx;
    Prepare(&ctx, e.o);
    if (grpc::Status s = admin->ListDisabled(&ctx, {}, &r); !s.ok()) {
      return Fail(s, e.o, "list", e.err);
    }
    if (e.o.json) {
      e.out << Json(r);
    } else {
      PrintDisabled(r, e.out);
    }
    return kOk;
  }
  v1::BreakerState filter = v1::BREAKER_STATE_UNSPECIFIED;
  if (!e.o.state.empty() && e.o.state != "OPEN" && e.o.state != "HALF_OPEN" &&
      e.o.state != "CLOSED") {
    return Usage(e.err, absl::StrCat("--state=", e.o.state,
                                     ": expected OPEN, HALF_OPEN, CLOSED, "
                                     "PAUSED or DISABLED"));
  }
  if (!e.o.state.empty()) v1::BreakerState_Parse(e.o.state, &filter);
  auto stub = v1::RetryCoordinator::NewStub(e.channel);
  v1::ListEndpointsResponse all;
  if (grpc::Status s = ListAll(*stub, filter, e.o, &all); !s.ok()) {
    return Fail(s, e.o, "list", e.err);
  }
  if (e.o.json) {
    e.out << Json(all);
    return kOk;
  }
  const absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows = {kEndpointHeader};
  for (const v1::EndpointState& s : all.endpoints()) rows.push_back(EndpointRow(s, now));
  PrintTable(rows, e.out);
  e.out << all.endpoints_size() << " shown, " << all.total_tracked()
        << " tracked\n";
  return kOk;
}

int Get(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 2) return Usage(e.err, "usage: staggerctl get KEY");
  auto stub = v1::RetryCoordinator::NewStub(e.channel);
  v1::GetEndpointRequest req;
  req.set_endpoint(args[1]);
  v1::GetEndpointResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = stub->GetEndpoint(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "get", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
    return kOk;
  }
  const v1::EndpointState& s = r.state();
  const absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows = {
      {"endpoint", s.endpoint()},
      {"policy", s.policy()},
      {"breaker", v1::BreakerState_Name(s.breaker_state())},
      {"open until", When(s.open_until())},
      {"consecutive failures", absl::StrCat(s.consecutive_failures())},
      {"consecutive trips", absl::StrCat(s.consecutive_trips())},
      {"budget remaining", absl::StrFormat("%.1f", s.budget_remaining())},
      {"retry-after until", When(s.retry_after_until())},
      {"last seen", When(s.last_seen())},
  };
  if (s.has_release_pace()) {
    rows.push_back({"release pace", absl::StrFormat("%.1f/s (%s)",
                                                    s.release_pace().per_second(),
                                                    v1::PaceSource_Name(
                                                        s.release_pace().learned_from()))});
  }
  if (s.has_pause()) {
    rows.push_back({"paused until", absl::StrCat(When(s.pause().until()), " (in ",
                                                 In(s.pause().until(), now), ")")});
    rows.push_back({"pause reason", s.pause().reason()});
    rows.push_back({"paused by", s.pause().paused_by()});
    if (!s.pause().prefix().empty()) {
      rows.push_back({"pause prefix", s.pause().prefix()});
    }
  }
  if (s.has_disabled()) {
    rows.push_back({"disabled", absl::StrCat(TriggerName(s.disabled().trigger()),
                                             " since ",
                                             When(s.disabled().since()))});
    rows.push_back({"disable reason", s.disabled().reason()});
    if (!s.disabled().disabled_by().empty()) {
      rows.push_back({"disabled by", s.disabled().disabled_by()});
    }
  }
  PrintTable(rows, e.out);
  return kOk;
}

// "KEY" or "--prefix P" (exactly one) into a PauseTarget.
bool TargetFrom(const std::vector<std::string>& args, Env& e,
                v1::PauseTarget* t, int* code) {
  const bool has_key = args.size() == 2;
  if (args.size() > 2 || has_key == !e.o.prefix.empty()) {
    *code = Usage(e.err, absl::StrCat(args[0],
                                      ": give exactly one of KEY or --prefix P"));
    return false;
  }
  if (has_key) {
    t->set_endpoint(args[1]);
  } else {
    t->set_prefix(e.o.prefix);
  }
  return true;
}

int PauseCmd(const std::vector<std::string>& args, Env& e) {
  v1::PauseRequest req;
  int code = kOk;
  if (!TargetFrom(args, e, req.mutable_target(), &code)) return code;
  if (e.o.pause_for <= absl::ZeroDuration()) {
    return Usage(e.err, "pause: --for DURATION is required (e.g. --for 10m)");
  }
  if (e.o.reason.empty()) return Usage(e.err, "pause: --reason TEXT is required");
  *req.mutable_duration() = TimeUtil::NanosecondsToDuration(
      absl::ToInt64Nanoseconds(e.o.pause_for));
  req.set_reason(e.o.reason);
  req.set_operation_id(e.o.operation_id);
  auto admin = v1::Admin::NewStub(e.channel);
  v1::PauseResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = admin->Pause(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "pause", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
  } else {
    e.out << "paused " << Target(r.pause().target()) << " until "
          << When(r.pause().until()) << "\n";
  }
  return kOk;
}

int ResumeCmd(const std::vector<std::string>& args, Env& e) {
  v1::ResumeRequest req;
  int code = kOk;
  if (!TargetFrom(args, e, req.mutable_target(), &code)) return code;
  req.set_operation_id(e.o.operation_id);
  auto admin = v1::Admin::NewStub(e.channel);
  v1::ResumeResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = admin->Resume(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "resume", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
  } else {
    e.out << "resumed " << Target(r.resumed().target()) << "\n";
  }
  return kOk;
}

int ResetCmd(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 2) return Usage(e.err, "usage: staggerctl reset KEY");
  v1::ResetEndpointRequest req;
  req.set_endpoint(args[1]);
  req.set_reason(e.o.reason);
  auto admin = v1::Admin::NewStub(e.channel);
  v1::ResetEndpointResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = admin->ResetEndpoint(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "reset", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
  } else {
    e.out << "reset " << args[1] << "\n";
  }
  return kOk;
}

int DisableCmd(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 2) {
    return Usage(e.err, "usage: staggerctl disable KEY --reason TEXT");
  }
  if (e.o.reason.empty()) {
    return Usage(e.err, "disable: --reason TEXT is required");
  }
  v1::DisableRequest req;
  req.set_endpoint(args[1]);
  req.set_reason(e.o.reason);
  req.set_operation_id(e.o.operation_id);
  auto admin = v1::Admin::NewStub(e.channel);
  v1::DisableResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = admin->Disable(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "disable", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
  } else {
    e.out << "disabled " << args[1] << "\n";
  }
  return kOk;
}

int EnableCmd(const std::vector<std::string>& args, Env& e) {
  if (args.size() != 2) return Usage(e.err, "usage: staggerctl enable KEY");
  v1::EnableRequest req;
  req.set_endpoint(args[1]);
  req.set_reason(e.o.reason);
  req.set_operation_id(e.o.operation_id);
  auto admin = v1::Admin::NewStub(e.channel);
  v1::EnableResponse r;
  grpc::ClientContext ctx;
  Prepare(&ctx, e.o);
  if (grpc::Status s = admin->Enable(&ctx, req, &r); !s.ok()) {
    return Fail(s, e.o, "enable", e.err);
  }
  if (e.o.json) {
    e.out << Json(r);
  } else {
    e.out << "enabled " << args[1] << " (disabled by "
          << TriggerName(r.ended().trigger()) << " since "
          << When(r.ended().since()) << ")\n";
  }
  return kOk;
}

}  // namespace

std::string Usage() {
  return R"(staggerctl: inspect and operate a Stagger coordinator (staggerd).

  staggerctl [flags] status
  staggerctl [flags] list [--state=OPEN|HALF_OPEN|CLOSED|PAUSED|DISABLED]
                          [--json]
  staggerctl [flags] get KEY
  staggerctl [flags] pause KEY|--prefix P --for 10m --reason TEXT
  staggerctl [flags] resume KEY|--prefix P
  staggerctl [flags] reset KEY [--reason TEXT]
  staggerctl [flags] disable KEY --reason TEXT
  staggerctl [flags] enable KEY [--reason TEXT]
  staggerctl [flags] watch [--prefix P] [--kinds K,...] [--history]
                           [--resume_file FILE] [--json]

Flags (--helpfull: each with its default):
  --address HOST:PORT    staggerd's gRPC address (default 127.0.0.1:50051),
                         or every replica's, comma-separated: the command
                         runs on each (a pause must reach all)
  --tls_ca_file FILE     TLS: the CA that signed staggerd's certificate
  --tls_cert_file FILE   mutual TLS: this client's certificate (with key)
  --tls_key_file FILE
  --tls_server_name NAME the name in staggerd's certificate, if not the
                         --address host
  --json                 JSON (proto field names) instead of a table
  --timeout 5s           per call
  --state STATE          list: only OPEN, HALF_OPEN, CLOSED, PAUSED or
                         DISABLED
  --limit 10000          list: at most this many endpoints
  --prefix P             pause, resume: every key under a prefix; watch:
                         only events of keys under it
  --for 10m              pause: how long
  --reason TEXT          pause, reset, disable, enable: why (logged, shown)
  --kinds K,...          watch: only these kinds (BREAKER_OPENED, PAUSED,
                         DISABLED, ...; docs/OPERATING.md lists them)
  --history              watch: start with the history each replica holds
  --resume_file FILE     watch: read each replica's resume token from FILE
                         at start, write them after every event

Exit codes: 0 done, 1 other error, 2 bad usage, 3 staggerd unreachable
(or a TLS mismatch), 4 not allowed (PERMISSION_DENIED), 5 not found,
6 invalid argument. On several addresses: 0 if each succeeded (NOT_FOUND
counts as success where another address succeeded), else the first
failure's code.
)";
}

int RunCommand(const std::vector<std::string>& args,
               const CommandOptions& options,
               std::shared_ptr<grpc::Channel> channel, std::ostream& out,
               std::ostream& err) {
  if (args.empty()) return Usage(err, "no command given");
  Env e{options, std::move(channel), out, err};
  const std::string& cmd = args[0];
  if (cmd == "status") return Status(args, e);
  if (cmd == "list") return List(args, e);
  if (cmd == "get") return Get(args, e);
  if (cmd == "pause") return PauseCmd(args, e);
  if (cmd == "resume") return ResumeCmd(args, e);
  if (cmd == "reset") return ResetCmd(args, e);
  if (cmd == "disable") return DisableCmd(args, e);
  if (cmd == "enable") return EnableCmd(args, e);
  return Usage(err, absl::StrCat("unknown command \"", cmd, "\""));
}

}  // namespace stagger::staggerctl
