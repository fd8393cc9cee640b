#include "server/status/status_api.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/http/json.h"
#include "core/http/query_string.h"
#include "server/service/coordinator_service.h"
#include "server/service/proto_convert.h"
#include "server/service/watch_events.h"
#include "stagger/v1/admin.pb.h"
#include "stagger/v1/coordinator.pb.h"
#include "stagger/v1/watch.pb.h"

namespace stagger::status {

using http::HttpResponse;
using http::HttpRoutes;
using http::IntParam;
using http::JsonError;
using http::JsonString;
using http::ParseQueryString;
using http::ProtoJson;
using http::QueryParams;
using http::Quoted;
using http::WithMembers;

namespace {

using service::CoordinatorService;

HttpResponse Ok(std::string json) { return {200, "application/json", json}; }

HttpResponse Error(const absl::Status& s) {
  const int code = s.code() == absl::StatusCode::kNotFound ? 404 : 400;
  return {code, "application/json", JsonError(s.message())};
}

std::string Timestamp(absl::Time t) {
  if (t == absl::InfinitePast()) return "null";
  return JsonString(absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone()));
}

std::string Replica(const PeerStatus& p) {
  return absl::StrCat(
      "{\"name\":", JsonString(p.name), ",\"self\":", p.self ? "true" : "false",
      ",\"address\":", JsonString(p.address), ",\"health\":",
      JsonString(p.health), ",\"detail\":", JsonString(p.detail),
      ",\"checked_at\":", Timestamp(p.checked_at), "}");
}

std::string Counts(const std::array<int64_t, DecisionRing::kSeconds>& c) {
  return absl::StrCat("[", absl::StrJoin(c, ","), "]");
}

}  // namespace

HttpResponse StatusApi::Summary(absl::string_view query) const {
  if (auto params = ParseQueryString(query, {}); !params.ok()) {
    return Error(params.status());
  }
  const std::vector<PeerStatus> replicas = peers_->Snapshot();
  std::string self, list;
  for (const PeerStatus& p : replicas) {
    if (p.self) self = p.name;
    absl::StrAppend(&list, list.empty() ? "" : ",", Replica(p));
  }
  const engine::EngineStats stats = engine_->Stats();
  std::string breakers;
  for (int s = 1; s <= engine::kNumBreakerStates; ++s) {
    absl::StrAppend(
        &breakers, s == 1 ? "" : ",",
        JsonString(v1::BreakerState_Name(static_cast<v1::BreakerState>(s))),
        ":", stats.by_breaker_state[s]);
  }
  return Ok(absl::StrCat(
      "{\"now\":", Timestamp(clock_->Now()), ",\"replica\":", JsonString(self),
      ",\"replicas\":[", list, "],\"total_tracked\":", stats.tracked,
      ",\"breakers\":{", breakers, "},\"evicted_total\":", stats.evicted_total,
      "}"));
}

HttpResponse StatusApi::Endpoints(absl::string_view query) const {
  auto params = ParseQueryString(query, {"filter", "page_size", "page_token"});
  if (!params.ok()) return Error(params.status());
  absl::StatusOr<int> page_size =
      IntParam(*params, "page_size", 1, CoordinatorService::kMaxPageSize,
               CoordinatorService::kDefaultPageSize);
  if (!page_size.ok()) return Error(page_size.status());
  const absl::string_view filter = params->Get("filter").value_or("not_clear");
  if (filter != "not_clear" && filter != "all") {
    return Error(absl::InvalidArgumentError(absl::StrCat(
        "query: filter: want not_clear or all, got ", Quoted(filter))));
  }
  absl::StatusOr<std::string> after =
      service::DecodePageToken(params->Get("page_token").value_or(""));
  if (!after.ok()) {
    return Error(absl::InvalidArgumentError(
        absl::StrCat("query: ", after.status().message())));
  }
  const engine::ListPage page =
      filter == "all" ? engine_->List(*after, *page_size, std::nullopt)
                      : engine_->ListNotClear(*after, *page_size);
  v1::ListEndpointsResponse resp;
  for (const engine::EndpointSnapshot& s : page.endpoints) {
    service::ToProto(s, resp.add_endpoints());
  }
  if (!page.next_after.empty()) {
    resp.set_next_page_token(service::EncodePageToken(page.next_after));
  }
  resp.set_total_tracked(page.total_tracked);
  const int64_t shown = static_cast<int64_t>(page.endpoints.size());
  return Ok(WithMembers(
      ProtoJson(resp, /*indent=*/false),
      {{"filter", JsonString(filter)},
       {"page_size", absl::StrCat(*page_size)},
       {"scanned", absl::StrCat(page.scanned)},
       {"matched", absl::StrCat(page.matched)},
       {"left_out", absl::StrCat(std::max<int64_t>(0, page.matched - shown))}}));
}

HttpResponse StatusApi::Endpoint(absl::string_view query) const {
  auto params = ParseQueryString(query, {"key"});
  if (!params.ok()) return Error(params.status());
  const std::optional<absl::string_view> key = params->Get("key");
  if (!key.has_value()) {
    return Error(absl::InvalidArgumentError("query: key: missing"));
  }
  absl::StatusOr<engine::EndpointSnapshot> snap = engine_->Inspect(*key);
  if (!snap.ok()) return Error(snap.status());
  v1::GetEndpointResponse resp;
  service::ToProto(*snap, resp.mutable_state());
  return Ok(ProtoJson(resp, /*indent=*/false));
}

HttpResponse StatusApi::Decisions(absl::string_view query) const {
  if (auto params = ParseQueryString(query, {}); !params.ok()) {
    return Error(params.status());
  }
  const DecisionRing::Window w = ring_->Read();
  std::string verdicts;
  for (int v = 1; v <= DecisionRing::kVerdicts; ++v) {
    absl::StrAppend(&verdicts, v == 1 ? "" : ",",
                    JsonString(v1::Verdict_Name(static_cast<v1::Verdict>(v))),
                    ":", Counts(w.counts[v - 1]));
  }
  return Ok(absl::StrCat("{\"last_second\":", w.last_second,
                         ",\"seconds\":", DecisionRing::kSeconds,
                         ",\"verdicts\":{", verdicts, "}}"));
}

HttpResponse StatusApi::Pauses(absl::string_view query) const {
  if (auto params = ParseQueryString(query, {}); !params.ok()) {
    return Error(params.status());
  }
  v1::ListPausesResponse resp;
  for (const engine::Pause& p : engine_->pauses().List(clock_->Now())) {
    service::ToProto(p, resp.add_pauses());
  }
  return Ok(ProtoJson(resp, /*indent=*/false));
}

HttpResponse StatusApi::Disabled(absl::string_view query) const {
  if (auto params = ParseQueryString(query, {}); !params.ok()) {
    return Error(params.status());
  }
  v1::ListDisabledResponse resp;
  for (const engine::Disable& d : engine_->disables().List()) {
    v1::DisabledEndpoint* out = resp.add_endpoints();
    out->set_endpoint(d.endpoint);
    service::ToProto(d, out->mutable_disabled());
  }
  return Ok(ProtoJson(resp, /*indent=*/false));
}

namespace {

// A decimal uint64 query parameter, `fallback` if absent.
absl::StatusOr<uint64_t> Uint64Param(const QueryParams& params,
                                     absl::string_view name,
                                     uint64_t fallback) {
  const std::optional<absl::string_view> v = params.Get(name);
  if (!v.has_value()) return fallback;
  uint64_t out = 0;
  if (v->empty() || v->size() > 20 ||
      v->find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query: ", name, ": want a decimal number, got ", Quoted(*v)));
  }
  return out;
}

}  // namespace

HttpResponse StatusApi::Events(absl::string_view query) const {
  auto params = ParseQueryString(query, {"after", "limit", "incarnation"});
  if (!params.ok()) return Error(params.status());
  if (log_ == nullptr) {
    return Error(absl::NotFoundError("events: this server keeps no watch log"));
  }
  absl::StatusOr<uint64_t> after = Uint64Param(*params, "after", 0);
  if (!after.ok()) return Error(after.status());
  absl::StatusOr<int> limit = IntParam(*params, "limit", 1, 1000, 100);
  if (!limit.ok()) return Error(limit.status());
  absl::StatusOr<uint64_t> incarnation =
      Uint64Param(*params, "incarnation", log_->incarnation());
  if (!incarnation.ok()) return Error(incarnation.status());
  const bool restarted = *incarnation != log_->incarnation();
  const uint64_t from = restarted ? 0 : *after + 1;
  service::WatchLog::Page page = log_->Read(from, {}, *limit);
  std::string events;
  for (const v1::WatchEvent& e : page.events) {
    absl::StrAppend(&events, events.empty() ? "" : ",",
                    ProtoJson(e, /*indent=*/false));
  }
  return Ok(absl::StrCat(
      "{\"replica\":", JsonString(log_->replica()), ",\"incarnation\":\"",
      log_->incarnation(), "\",\"oldest\":", log_->oldest(),
      ",\"next\":", page.next - 1, ",\"restarted\":",
      restarted ? "true" : "false", ",\"missed_from\":", page.missed_from,
      ",\"missed_to\":", page.missed_to, ",\"events\":[", events, "]}"));
}

void StatusApi::AddRoutes(HttpRoutes* routes) const {
  (*routes)["/api/summary"] = [this](absl::string_view q) { return Summary(q); };
  (*routes)["/api/endpoints"] = [this](absl::string_view q) {
    return Endpoints(q);
  };
  (*routes)["/api/endpoint"] = [this](absl::string_view q) {
    return Endpoint(q);
  };
  (*routes)["/api/decisions"] = [this](absl::string_view q) {
    return Decisions(q);
  };
  (*routes)["/api/pauses"] = [this](absl::string_view q) { return Pauses(q); };
  (*routes)["/api/disabled"] = [this](absl::string_view q) {
    return Disabled(q);
  };
  (*routes)["/api/events"] = [this](absl::string_view q) { return Events(q); };
}

}  // namespace stagger::status
