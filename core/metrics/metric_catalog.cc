// MetricCatalog: the label value sets, compile-time checks of the table and
// its JSON form. See metric_catalog.h for the contract.
#include "core/metrics/metric_catalog.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "core/engine/decision.h"

namespace stagger::metrics {
namespace {

constexpr bool InIdOrder() {
  for (int i = 0; i < kNumMetrics; ++i) {
    if (static_cast<int>(kMetricCatalog[i].id) != i) return false;
  }
  return true;
}
static_assert(InIdOrder(), "kMetricCatalog must list metrics in MetricId order");
static_assert(static_cast<int>(MetricId::kClientSyncReconnects) + 1 ==
                  kNumMetrics,
              "kNumMetrics must count every MetricId");
static_assert(static_cast<int>(LabelSet::kCountKind) + 1 ==
                  kNumLabelSets,
              "kNumLabelSets must count every LabelSet");

constexpr bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}
constexpr bool NamesFollowConventions() {
  for (const MetricSpec& m : kMetricCatalog) {
    const std::string_view prefix =
        m.exporter() == Exporter::kClient ? "stagger_client_" : "stagger_";
    if (m.name.substr(0, prefix.size()) != prefix) return false;
    if ((m.type == MetricType::kCounter) != EndsWith(m.name, "_total")) {
      return false;
    }
    if (m.num_labels < 0 || m.num_labels > kMaxLabels || m.help.empty()) {
      return false;
    }
  }
  return true;
}
static_assert(NamesFollowConventions(),
              "metric names: stagger_ (client: stagger_client_) prefix, "
              "_total exactly on counters, help text, <= kMaxLabels labels");

static_assert(std::string_view(kGrpcCodeNames[3]) == "INVALID_ARGUMENT" &&
                  std::string_view(kGrpcCodeNames[16]) == "UNAUTHENTICATED",
              "kGrpcCodeNames follows grpc::StatusCode 0..16");
static_assert(std::string_view(kAttemptLabels.back()) == "overflow" &&
                  std::string_view(kAuthzServiceLabels.back()) == "other",
              "the catch-all label values come last");

// Names from the engine, values 1..n of its enum.
template <typename Enum>
std::vector<const char*> EngineNames(int n, const char* (*name)(Enum)) {
  std::vector<const char*> out;
  for (int v = 1; v <= n; ++v) out.push_back(name(static_cast<Enum>(v)));
  return out;
}

template <size_t N>
std::vector<const char*> Of(const std::array<const char*, N>& a) {
  return std::vector<const char*>(a.begin(), a.end());
}

// Every gRPC code but OK (not an error) and INVALID_ARGUMENT (the caller's
// bug, answered as an error, never a fallback).
std::vector<const char*> ClientErrorCodes() {
  std::vector<const char*> out;
  for (const char* name : kGrpcCodeNames) {
    const std::string_view n(name);
    if (n != "OK" && n != "INVALID_ARGUMENT") out.push_back(name);
  }
  return out;
}

std::vector<std::vector<const char*>> AllLabelSets() {
  std::vector<std::vector<const char*>> sets(kNumLabelSets);
  auto set = [&sets](LabelSet s) -> std::vector<const char*>& {
    return sets[static_cast<size_t>(s)];
  };
  set(LabelSet::kCall) = Of(kCallLabels);
  set(LabelSet::kVerdict) =
      EngineNames(static_cast<int>(engine::Verdict::kDone), engine::VerdictName);
  set(LabelSet::kReason) = EngineNames(engine::kMaxReason, engine::ReasonName);
  set(LabelSet::kBreakerState) =
      EngineNames(engine::kNumBreakerStates, engine::BreakerStateName);
  set(LabelSet::kAttempt) = Of(kAttemptLabels);
  set(LabelSet::kResult) = Of(kResultLabels);
  set(LabelSet::kMethod) = Of(kMethodLabels);
  set(LabelSet::kBatchMethod) = Of(kBatchMethodLabels);
  set(LabelSet::kStateLoadFailure) = Of(kStateLoadFailureLabels);
  set(LabelSet::kAuthzService) = Of(kAuthzServiceLabels);
  set(LabelSet::kDenyCause) = Of(kDenyCauseLabels);
  set(LabelSet::kAdminAction) = Of(kAdminActionLabels);
  set(LabelSet::kClientErrorCode) = ClientErrorCodes();
  set(LabelSet::kDirection) = Of(kDirectionLabels);
  set(LabelSet::kDisableTrigger) = Of(kDisableTriggerLabels);
  set(LabelSet::kCountsDropCause) = Of(kCountsDropCauseLabels);
  set(LabelSet::kCountReport) = Of(kCountReportLabels);
  set(LabelSet::kCountKind) = Of(kCountKindLabels);
  return sets;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

void AppendLabel(std::string& out, const LabelSpec& label) {
  out += "{\"name\": ";
  AppendJsonString(out, label.name);
  out += ", \"values\": [";
  const char* sep = "";
  for (const char* v : LabelValues(label.values)) {
    out += sep;
    AppendJsonString(out, v);
    sep = ", ";
  }
  out += "]}";
}

void AppendMetric(std::string& out, const MetricSpec& m) {
  out += "    {\"name\": ";
  AppendJsonString(out, m.name);
  absl::StrAppend(&out, ", \"type\": \"", MetricTypeName(m.type),
                  "\", \"exporter\": \"", ExporterName(m.exporter()),
                  "\", \"registrar\": \"", RegistrarName(m.registrar),
                  "\",\n     \"help\": ");
  AppendJsonString(out, m.help);
  out += ",\n     \"labels\": [";
  for (int i = 0; i < m.num_labels; ++i) {
    if (i > 0) out += ", ";
    AppendLabel(out, m.labels[i]);
  }
  out += "]}";
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

const char* RegistrarName(Registrar r) {
  switch (r) {
    case Registrar::kServerMetrics: return "ServerMetrics";
    case Registrar::kSecurityMetrics: return "SecurityMetrics";
    case Registrar::kClientMetrics: return "ClientMetrics";
  }
  return "unknown";
}

const char* ExporterName(Exporter exporter) {
  return exporter == Exporter::kClient ? "client" : "staggerd";
}

const std::vector<const char*>& LabelValues(LabelSet set) {
  static const auto* sets =
      new std::vector<std::vector<const char*>>(AllLabelSets());
  return (*sets)[static_cast<size_t>(set)];
}

std::string CatalogJson() {
  std::string out = "{\"metrics\": [\n";
  for (int i = 0; i < kNumMetrics; ++i) {
    if (i > 0) out += ",\n";
    AppendMetric(out, kMetricCatalog[i]);
  }
  out += "\n]}\n";
  return out;
}

}  // namespace stagger::metrics
