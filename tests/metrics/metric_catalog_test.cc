// The metric catalog is the one source: its own rules hold; what
// ServerMetrics, SecurityMetrics and ClientMetrics register is exactly the
// catalog's entries for each (names, types, help, label names, every label
// value, nothing else); and the metric table of docs/OBSERVABILITY.md lists
// every catalog metric, in catalog order, with the same type, labels, label
// values and histogram buckets, and nothing else. Mutations prove each
// check bites. The deploy rules and
// dashboard are held to the catalog by tests/deploy, staggerd's live page
// by metrics.live_scrape (both through stagger-metric-catalog's JSON).
#include "core/metrics/metric_catalog.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/internal/client_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "core/engine/decision.h"
#include "core/metrics/metric_registration.h"
#include "server/metrics/server_metrics.h"
#include "server/security/security_metrics.h"
#include "tests/testing/files.h"

namespace stagger::metrics {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::set<std::string> ValueSet(LabelSet set) {
  const auto& v = LabelValues(set);
  return std::set<std::string>(v.begin(), v.end());
}

const char* TypeOf(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter: return "counter";
    case prometheus::MetricType::Gauge: return "gauge";
    case prometheus::MetricType::Histogram: return "histogram";
    default: return "other";
  }
}

// ---- the catalog's own rules ------------------------------------------

TEST(MetricCatalog, NamesAreUniqueAndLabelsWellFormed) {
  std::set<std::string_view> names;
  const std::regex label_name("[a-z][a-z_]*");
  for (const MetricSpec& m : kMetricCatalog) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    std::set<std::string_view> labels;
    for (int i = 0; i < m.num_labels; ++i) {
      const std::string name(m.labels[i].name);
      EXPECT_TRUE(std::regex_match(name, label_name)) << m.name << " " << name;
      EXPECT_NE(name, "le") << m.name << ": le is the histogram's own label";
      EXPECT_TRUE(labels.insert(m.labels[i].name).second) << m.name;
    }
  }
}

TEST(MetricCatalog, EveryLabelSetIsNonEmptyWithoutDuplicates) {
  for (int s = 0; s < kNumLabelSets; ++s) {
    const auto set = static_cast<LabelSet>(s);
    const auto& values = LabelValues(set);
    EXPECT_FALSE(values.empty()) << "label set " << s;
    EXPECT_EQ(ValueSet(set).size(), values.size()) << "label set " << s;
  }
}

TEST(MetricCatalog, EngineSetsFollowTheEngine) {
  EXPECT_EQ(LabelValues(LabelSet::kReason).size(),
            static_cast<size_t>(engine::kMaxReason));
  EXPECT_EQ(ValueSet(LabelSet::kReason).count("PAUSED"), 1u);
  EXPECT_EQ(ValueSet(LabelSet::kVerdict),
            (std::set<std::string>{"PROCEED", "DEFER", "GIVE_UP", "DONE"}));
  EXPECT_EQ(ValueSet(LabelSet::kBreakerState),
            (std::set<std::string>{"CLOSED", "OPEN", "HALF_OPEN"}));
}

TEST(MetricCatalog, ClientErrorCodesAreEveryCodeButOkAndInvalidArgument) {
  const std::set<std::string> codes = ValueSet(LabelSet::kClientErrorCode);
  EXPECT_EQ(codes.size(), 15u);
  EXPECT_EQ(codes.count("OK"), 0u);
  EXPECT_EQ(codes.count("INVALID_ARGUMENT"), 0u);
  EXPECT_EQ(codes.count("UNAVAILABLE"), 1u);
}

TEST(MetricCatalog, JsonNamesEveryMetricWithItsRegistrarAndLabelValues) {
  const std::string json = CatalogJson();
  for (const MetricSpec& m : kMetricCatalog) {
    const std::string entry = "{\"name\": \"" + std::string(m.name) +
                              "\", \"type\": \"" + MetricTypeName(m.type) +
                              "\", \"exporter\": \"" +
                              ExporterName(m.exporter()) +
                              "\", \"registrar\": \"" +
                              RegistrarName(m.registrar) + "\"";
    EXPECT_NE(json.find(entry), std::string::npos) << entry;
  }
  EXPECT_NE(json.find("\"PAUSED\""), std::string::npos);
  EXPECT_NE(json.find("\"overflow\""), std::string::npos);
  EXPECT_NE(json.find("\"incompatible_version\""), std::string::npos);
  EXPECT_NE(json.find("\"grpc.health.v1.Health\""), std::string::npos);
}

// ---- registration is the catalog --------------------------------------

// Errors of one family against its catalog entry: type, help, label names,
// values outside the sets, values never created.
void FamilyVsSpec(const prometheus::MetricFamily& f, const MetricSpec& m,
                  std::vector<std::string>& errors) {
  if (TypeOf(f.type) != std::string(MetricTypeName(m.type))) {
    errors.push_back(f.name + ": type differs from the catalog");
  }
  if (f.help != m.help) errors.push_back(f.name + ": help differs");
  std::vector<std::set<std::string>> seen(m.num_labels);
  for (const prometheus::ClientMetric& series : f.metric) {
    if (static_cast<int>(series.label.size()) != m.num_labels) {
      errors.push_back(f.name + ": a series has the wrong label count");
      continue;
    }
    for (int i = 0; i < m.num_labels; ++i) {
      const prometheus::ClientMetric::Label* l = nullptr;
      for (const auto& x : series.label) {
        if (x.name == m.labels[i].name) l = &x;
      }
      if (l == nullptr) {
        errors.push_back(f.name + ": a series lacks " +
                         std::string(m.labels[i].name));
        continue;
      }
      if (ValueSet(m.labels[i].values).count(l->value) == 0) {
        errors.push_back(f.name + ": value outside the set: " + l->value);
      }
      seen[i].insert(l->value);
    }
  }
  for (int i = 0; i < m.num_labels; ++i) {
    if (seen[i] != ValueSet(m.labels[i].values)) {
      errors.push_back(f.name + ": not every " + std::string(m.labels[i].name) +
                       " value has a series");
    }
  }
}

// Errors between what `registry` holds and the catalog's metrics of
// `registrar`: missing or extra families, and FamilyVsSpec's.
std::vector<std::string> RegistryVsCatalog(prometheus::Registry& registry,
                                           Registrar registrar) {
  std::vector<std::string> errors;
  std::map<std::string, const MetricSpec*> want;
  for (const MetricSpec& m : kMetricCatalog) {
    if (m.registrar == registrar) want[std::string(m.name)] = &m;
  }
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    auto it = want.find(f.name);
    if (it == want.end()) {
      errors.push_back("registered but not in the catalog as " +
                       std::string(RegistrarName(registrar)) + "'s: " + f.name);
      continue;
    }
    FamilyVsSpec(f, *it->second, errors);
    want.erase(it);
  }
  for (const auto& [name, spec] : want) {
    errors.push_back("in the catalog but not registered: " + name);
  }
  return errors;
}

TEST(MetricCatalog, ServerMetricsRegistersExactlyItsCatalogEntries) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, ServerMetrics::kMaxAttemptLabel);
  EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kServerMetrics),
              IsEmpty());
}

TEST(MetricCatalog, SecurityMetricsRegistersExactlyItsCatalogEntries) {
  prometheus::Registry registry;
  security::SecurityMetrics metrics(registry);
  EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kSecurityMetrics),
              IsEmpty());
}

TEST(MetricCatalog, ClientMetricsRegistersExactlyItsCatalogEntries) {
  prometheus::Registry registry;
  client::ClientMetrics metrics(registry);
  EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kClientMetrics),
              IsEmpty());
}

TEST(MetricCatalog, EveryMetricHasARegistrarThatRegistersIt) {
  // The three registrars together: every catalog entry, nothing else.
  prometheus::Registry server, security, client;
  ServerMetrics s(server, ServerMetrics::kMaxAttemptLabel);
  security::SecurityMetrics sec(security);
  client::ClientMetrics c(client);
  std::set<std::string> registered;
  for (auto* r : {&server, &security, &client}) {
    for (const auto& f : r->Collect()) registered.insert(f.name);
  }
  std::set<std::string> catalog;
  for (const MetricSpec& m : kMetricCatalog) catalog.emplace(m.name);
  EXPECT_EQ(registered, catalog);
}

// The registry check bites: an extra family, a family of another registrar,
// a missing one and a missing label value are each reported.
TEST(MetricCatalog, TheRegistryCheckCatchesDrift) {
  {
    prometheus::Registry registry;
    client::ClientMetrics metrics(registry);
    prometheus::BuildGauge().Name("stagger_client_extra").Register(registry)
        .Add({});
    EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kClientMetrics),
                Contains(HasSubstr("not in the catalog as ClientMetrics's: "
                                   "stagger_client_extra")));
  }
  {
    prometheus::Registry registry;
    security::SecurityMetrics metrics(registry);
    EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kServerMetrics),
                Contains(HasSubstr("stagger_authz_denied_total")));
  }
  {
    prometheus::Registry registry;
    prometheus::BuildCounter()
        .Name("stagger_admin_actions_total")
        .Help(std::string(Metric(MetricId::kAdminActions).help))
        .Register(registry)
        .Add({{"action", "pause"}});
    EXPECT_THAT(
        RegistryVsCatalog(registry, Registrar::kSecurityMetrics),
        ::testing::AllOf(
            Contains(HasSubstr("stagger_admin_actions_total: not every "
                               "action value has a series")),
            Contains(HasSubstr("not registered: stagger_authz_denied_total"))));
  }
  {
    // ServerMetrics with K = 3: attempts 4..20 have no series.
    prometheus::Registry registry;
    ServerMetrics metrics(registry, 3);
    EXPECT_THAT(RegistryVsCatalog(registry, Registrar::kServerMetrics),
                Contains(HasSubstr("stagger_retry_delay_seconds: not every "
                                   "attempt value")));
  }
}

TEST(MetricCatalogDeathTest, CatalogLabelsRefusesValuesOutsideTheSet) {
  EXPECT_DEATH(CatalogLabels(MetricId::kEndpoints, {"HALFOPEN"}),
               "stagger_endpoints: label value outside");
  EXPECT_DEATH(CatalogLabels(MetricId::kDecisions, {"admit"}),
               "stagger_decisions_total: wrong number of label values");
  EXPECT_DEATH(OnlyLabelValues(MetricId::kDecisions),
               "stagger_decisions_total: has not exactly one label");
}

// ---- docs/OBSERVABILITY.md's metric table -------------------------------

struct DocRow {
  std::string name;
  std::string type;
  // label name -> values as written ("2..K" kept as is), in table order.
  std::vector<std::pair<std::string, std::vector<std::string>>> labels;
  std::string meaning;
};

// The cells of a Markdown table row, trimmed; "\|" (a value list's
// separator) does not split.
std::vector<std::string> TableCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {  // past the leading '|'
    if (line[i] == '|' && line[i - 1] != '\\') {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

DocRow ParseRow(const std::vector<std::string>& cells) {
  static const std::regex label_re("`([a-z_]+)`(?: = ([^,]*))?");
  DocRow row{std::string(absl::StripSuffix(
                    absl::StripPrefix(cells[0], "`"), "`")),
                cells[1],
                {},
                cells[3]};
  for (std::sregex_iterator it(cells[2].begin(), cells[2].end(), label_re), end;
       it != end; ++it) {
    std::vector<std::string> values;
    if ((*it)[2].matched) {
      values = absl::StrSplit((*it)[2].str(), "\\|", absl::SkipEmpty());
      for (std::string& v : values) {
        v = std::string(absl::StripAsciiWhitespace(v));
      }
    }
    row.labels.emplace_back((*it)[1].str(), values);
  }
  return row;
}

// Rows of the table whose header is "| Metric | Type | Labels | Meaning |",
// in table order.
std::vector<DocRow> DocMetricTable(const std::string& text) {
  std::vector<DocRow> rows;
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "| Metric | Type | Labels |")) {
      in_table = true;
      continue;
    }
    if (!in_table || absl::StartsWith(line, "|---")) continue;
    if (!absl::StartsWith(line, "| `")) break;
    const std::vector<std::string> cells = TableCells(line);
    if (cells.size() >= 4) rows.push_back(ParseRow(cells));
  }
  return rows;
}

// The table's values for a label equal the catalog's set; "N..K" stands for
// every numeric catalog value >= N.
bool SameValues(const std::vector<std::string>& written, LabelSet set) {
  std::set<std::string> want = ValueSet(set), got;
  const std::regex range("([0-9]+)\\.\\.K");
  const std::regex number("[0-9]+");
  for (const std::string& v : written) {
    std::smatch m;
    if (!std::regex_match(v, m, range)) {
      got.insert(v);
      continue;
    }
    for (const std::string& w : want) {
      if (std::regex_match(w, number) && std::stoi(w) >= std::stoi(m[1].str())) {
        got.insert(w);
      }
    }
  }
  return got == want;
}

// A histogram's bucket bounds, from the code that registers it.
const std::vector<double>* BucketsOf(MetricId id) {
  switch (id) {
    case MetricId::kRetryDelay: return &ServerMetrics::RetryDelayBuckets();
    case MetricId::kRpcDuration: return &ServerMetrics::RpcDurationBuckets();
    case MetricId::kBatchSize: return &ServerMetrics::BatchSizeBuckets();
    default: return nullptr;
  }
}

// A bound as the table writes it: "10 µs", "1 ms", "60 s" for a _seconds
// metric, the plain number otherwise.
std::string BoundText(double v, bool seconds) {
  if (!seconds) return absl::StrCat(v);
  if (v < 0.001) return absl::StrCat(v * 1e6, " µs");
  if (v < 1) return absl::StrCat(v * 1e3, " ms");
  return absl::StrCat(v, " s");
}

// The table's row of a histogram says "buckets FIRST .. LAST".
void BucketsVsRow(const DocRow& row, const MetricSpec& m,
                  std::vector<std::string>& errors) {
  const std::string name(m.name);
  const std::vector<double>* b = BucketsOf(m.id);
  if (b == nullptr || b->empty()) {
    errors.push_back(name + ": a histogram this test has no buckets for");
    return;
  }
  const bool seconds =
      absl::EndsWith(absl::string_view(m.name.data(), m.name.size()), "_seconds");
  const std::string want = absl::StrCat("buckets ", BoundText(b->front(), seconds),
                                        " .. ", BoundText(b->back(), seconds));
  if (!absl::StrContains(absl::AsciiStrToLower(row.meaning), want)) {
    errors.push_back(name + ": the table does not say \"" + want + "\"");
  }
}

void RowVsSpec(const DocRow& row, const MetricSpec& m,
               std::vector<std::string>& errors) {
  const std::string name(m.name);
  if (row.type != MetricTypeName(m.type)) {
    errors.push_back(name + ": the table says " + row.type);
  }
  if (m.type == MetricType::kHistogram) BucketsVsRow(row, m, errors);
  if (static_cast<int>(row.labels.size()) != m.num_labels) {
    errors.push_back(name + ": the table lists another number of labels");
    return;
  }
  for (int i = 0; i < m.num_labels; ++i) {
    const auto& [label, values] = row.labels[i];
    if (label != m.labels[i].name) {
      errors.push_back(name + ": the table's label " + label + " is not " +
                       std::string(m.labels[i].name));
    } else if (!SameValues(values, m.labels[i].values)) {
      errors.push_back(name + ": the table's values of " + label +
                       " differ from the catalog's");
    }
  }
}

std::vector<std::string> DocTableVsCatalog(const std::string& doc) {
  std::vector<std::string> errors;
  const std::vector<DocRow> rows = DocMetricTable(doc);
  if (rows.empty()) errors.push_back("no metric table found in the document");
  std::map<std::string, const DocRow*> by_name;
  std::vector<std::string> doc_order;
  for (const DocRow& row : rows) {
    if (!by_name.emplace(row.name, &row).second) {
      errors.push_back(row.name + ": two rows in the table");
    }
    doc_order.push_back(row.name);
  }
  std::vector<std::string> catalog_order;
  for (const MetricSpec& m : kMetricCatalog) {
    const std::string name(m.name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      errors.push_back(name + ": no row in the metric table");
      continue;
    }
    RowVsSpec(*it->second, m, errors);
    by_name.erase(it);
    catalog_order.push_back(name);
  }
  for (const auto& [name, row] : by_name) {
    errors.push_back(name + ": in the table but not in the catalog");
  }
  doc_order.erase(std::remove_if(doc_order.begin(), doc_order.end(),
                                 [&](const std::string& n) {
                                   return by_name.count(n) > 0;
                                 }),
                  doc_order.end());
  if (doc_order != catalog_order) {
    errors.push_back("the table's rows are not in catalog order");
  }
  return errors;
}

std::string ReadObservabilityDoc() {
  return stagger::testing::ReadFile(STAGGER_OBSERVABILITY_DOC);
}

TEST(MetricCatalog, DocTableListsEveryCatalogMetricInOrderAndNothingElse) {
  const std::string doc = ReadObservabilityDoc();
  ASSERT_FALSE(doc.empty()) << STAGGER_OBSERVABILITY_DOC;
  EXPECT_THAT(DocTableVsCatalog(doc), IsEmpty());
}

// The document's count of the pre-created decision series is the catalog's.
TEST(MetricCatalog, DocCountsTheDecisionSeries) {
  size_t n = 1;
  const MetricSpec& m = Metric(MetricId::kDecisions);
  for (int i = 0; i < m.num_labels; ++i) {
    n *= LabelValues(m.labels[i].values).size();
  }
  EXPECT_THAT(ReadObservabilityDoc(),
              HasSubstr("All " + std::to_string(n) + " combinations are "
                        "pre-created"));
}

// The document check bites: a renamed metric, a wrong type, a missing label
// value, a wrong range, wrong histogram buckets, an extra row and rows out of order are reported.
TEST(MetricCatalog, DocCheckCatchesDrift) {
  const std::string doc = ReadObservabilityDoc();
  auto mutate = [&](const std::string& from, const std::string& to) {
    std::string s = doc;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return DocTableVsCatalog(s);
  };
  EXPECT_THAT(mutate("| `stagger_pace_cuts_total` |", "| `stagger_pace_cut_total` |"),
              ::testing::AllOf(
                  Contains(HasSubstr("stagger_pace_cuts_total: no row")),
                  Contains(HasSubstr("stagger_pace_cut_total: in the "
                                     "table but not in the catalog"))));
  EXPECT_THAT(mutate("| `stagger_endpoints_tracked` | gauge |",
                     "| `stagger_endpoints_tracked` | counter |"),
              Contains(HasSubstr("the table says counter")));
  EXPECT_THAT(mutate("\\|RELEASED\\|ENDPOINT_DISABLED |", "\\|RELEASED |"),
              Contains(HasSubstr("values of reason differ")));
  EXPECT_THAT(mutate("`attempt` = 2..K\\|overflow", "`attempt` = 3..K\\|overflow"),
              Contains(HasSubstr("values of attempt differ")));
  EXPECT_THAT(mutate("buckets 10 µs .. 1 s", "buckets 10 µs .. 2 s"),
              Contains(HasSubstr("stagger_rpc_duration_seconds: the table "
                                 "does not say \"buckets 10 µs .. 1 s\"")));
  EXPECT_THAT(mutate("\\|force_breaker\\|disable\\|enable |", " |"),
              Contains(HasSubstr("values of action differ")));
  EXPECT_THAT(mutate("| `stagger_client_coordinator_up` | gauge | |",
                     "| `stagger_client_coordinator_up` | gauge | `code` |"),
              Contains(HasSubstr("another number of labels")));
  const size_t row = doc.find("| `stagger_misrouted_requests_total` |");
  ASSERT_NE(row, std::string::npos);
  std::string moved = doc;
  const std::string line = moved.substr(row, moved.find('\n', row) - row + 1);
  moved.erase(row, line.size());
  moved.insert(moved.find("| `stagger_retry_after_total` |"), line);
  EXPECT_THAT(DocTableVsCatalog(moved),
              Contains(HasSubstr("not in catalog order")));
}

}  // namespace
}  // namespace stagger::metrics
