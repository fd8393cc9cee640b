// Test helper: parses the Prometheus text exposition format (what
// prometheus::TextSerializer and /metrics produce) into samples, so tests
// can assert exact values by name and labels. Handles # HELP / # TYPE
// comments, label values with \\ \" \n escapes, and +Inf/-Inf/NaN values.
// Not a general validator: promtool does that in the live tests.
#ifndef STAGGER_TESTS_TESTING_PROM_TEXT_H_
#define STAGGER_TESTS_TESTING_PROM_TEXT_H_

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace stagger::testing {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;  // e.g. stagger_retry_delay_seconds_bucket
  Labels labels;
  double value = 0;
};

// "name{a=\"1\",b=\"2\"}" with labels in name order: a stable series key.
inline std::string SeriesKey(const std::string& name, const Labels& labels) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=\"", v, "\""));
  return absl::StrCat(name, "{", absl::StrJoin(parts, ","), "}");
}

class PromText {
 public:
  // Parses `text`; `ok()` is false (and `error()` says where) if a sample
  // line is malformed.
  explicit PromText(absl::string_view text) {
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      Sample s;
      if (!ParseLine(line, &s)) {
        error_ = absl::StrCat("line ", line_no, ": ", line);
        return;
      }
      samples_.push_back(std::move(s));
    }
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::vector<Sample>& samples() const { return samples_; }

  // The value of the one sample with exactly this name and these labels;
  // NaN if there is none (so an EXPECT_EQ against a number fails).
  double Value(const std::string& name, const Labels& labels = {}) const {
    for (const Sample& s : samples_) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nan("");
  }
  bool Has(const std::string& name, const Labels& labels = {}) const {
    for (const Sample& s : samples_) {
      if (s.name == name && s.labels == labels) return true;
    }
    return false;
  }

  // Sum over every sample named `name` (all label combinations).
  double Sum(const std::string& name) const {
    double sum = 0;
    for (const Sample& s : samples_) {
      if (s.name == name) sum += s.value;
    }
    return sum;
  }
  // Number of samples named `name`.
  int Count(const std::string& name) const {
    int n = 0;
    for (const Sample& s : samples_) n += s.name == name;
    return n;
  }
  // Every distinct value of label `label` on samples named `name`.
  std::set<std::string> LabelValues(const std::string& name,
                                    const std::string& label) const {
    std::set<std::string> out;
    for (const Sample& s : samples_) {
      if (s.name != name) continue;
      auto it = s.labels.find(label);
      if (it != s.labels.end()) out.insert(it->second);
    }
    return out;
  }
  // Every series key, for before/after comparisons.
  std::set<std::string> SeriesKeys() const {
    std::set<std::string> out;
    for (const Sample& s : samples_) out.insert(SeriesKey(s.name, s.labels));
    return out;
  }
  // Samples whose value is not zero, as "key=value" strings (for messages).
  std::vector<std::string> NonZero(absl::string_view prefix) const {
    std::vector<std::string> out;
    for (const Sample& s : samples_) {
      if (absl::StartsWith(s.name, prefix) && s.value != 0) {
        out.push_back(absl::StrCat(SeriesKey(s.name, s.labels), "=", s.value));
      }
    }
    return out;
  }

 private:
  static bool ParseLine(absl::string_view line, Sample* s) {
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s->name = std::string(line.substr(0, i));
    if (s->name.empty()) return false;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == absl::string_view::npos || eq + 1 >= line.size() ||
            line[eq + 1] != '"') {
          return false;
        }
        std::string key(line.substr(i, eq - i));
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value.push_back(line[j] == 'n' ? '\n' : line[j]);
          } else {
            value.push_back(line[j]);
          }
        }
        if (j >= line.size()) return false;
        s->labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return false;
      ++i;  // '}'
    }
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(i));
    // A timestamp may follow the value; only the value matters here.
    rest = rest.substr(0, rest.find(' '));
    if (rest.empty()) return false;
    const std::string v(rest);
    if (v == "+Inf") {
      s->value = INFINITY;
    } else if (v == "-Inf") {
      s->value = -INFINITY;
    } else if (v == "NaN") {
      s->value = std::nan("");
    } else {
      char* end = nullptr;
      s->value = std::strtod(v.c_str(), &end);
      if (end == nullptr || *end != '\0') return false;
    }
    return true;
  }

  std::vector<Sample> samples_;
  std::string error_;
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_PROM_TEXT_H_
