#include "bench/sim/report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace stagger::sim {

std::string Thousands(double v) {
  const int64_t n = std::llround(v);
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  const int len = static_cast<int>(digits.size());
  for (int i = 0; i < len; ++i) {
    if (i > 0 && (len - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

namespace {

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(d);
}

// The limiter, when it is not the default (a token bucket of 100 ms,
// refusing with a bare 503): ": token bucket of 20, 429 with Retry-After,
// 100/s of it taken by traffic the fleet cannot see".
std::string LimiterPhrase(const EndpointSpec& e) {
  std::vector<std::string> parts;
  switch (e.limiter) {
    case LimiterKind::kTokenBucket:
      if (e.burst > 0) {
        parts.push_back(absl::StrCat("token bucket of ", Thousands(e.burst)));
      }
      break;
    case LimiterKind::kQueue:
      parts.push_back(absl::StrCat(e.servers, " workers and a queue of up to ",
                                   Seconds(e.queue_timeout), " of wait"));
      break;
  }
  const RefusalSpec& r = e.refusal;
  if (r.status != 503 || r.retry_after || r.ratelimit_reset) {
    std::string refusal = absl::StrCat("refusing with ", r.status);
    if (r.retry_after) absl::StrAppend(&refusal, " + Retry-After");
    if (r.ratelimit_reset) absl::StrAppend(&refusal, " + RateLimit-Reset");
    parts.push_back(refusal);
  }
  if (e.hidden_per_second > 0) {
    parts.push_back(absl::StrCat(Thousands(e.hidden_per_second),
                                 "/s of it taken by traffic the fleet "
                                 "cannot see"));
  }
  return parts.empty() ? std::string()
                       : absl::StrCat(": ", absl::StrJoin(parts, ", "));
}

// "down for 20s, then instantly healthy", "down in [0s, 5s), [8s, 13s),
// then healthy", "always up"; then what it answers while down.
std::string EndpointPhrase(const EndpointSpec& e) {
  std::string out;
  if (e.down.empty()) {
    out = "always up";
  } else if (e.down.size() == 1 && e.down[0].start == absl::ZeroDuration()) {
    out = absl::StrCat("down for ", Seconds(e.down[0].end),
                       ", then instantly healthy");
  } else {
    std::vector<std::string> spans;
    for (const DownInterval& d : e.down) {
      spans.push_back(
          absl::StrCat("[", Seconds(d.start), ", ", Seconds(d.end), ")"));
    }
    out = absl::StrCat("down in ", absl::StrJoin(spans, ", "),
                       e.down.size() == 1 ? ", up before and after"
                                          : ", up in between and after");
  }
  if (!e.down.empty()) {
    absl::StrAppend(&out, e.down_retry_after > absl::ZeroDuration()
                              ? absl::StrCat(", answering 503 with Retry-After ",
                                             Seconds(e.down_retry_after),
                                             " while down")
                          : e.down_rate_limited
                              ? std::string(", answering 503 while down")
                              : std::string(", answering 500 while down"));
  }
  absl::StrAppend(&out, " (capacity ",
                  e.capacity_per_second > 0
                      ? absl::StrCat(Thousands(e.capacity_per_second), "/s",
                                     LimiterPhrase(e))
                      : std::string("unlimited"),
                  ")");
  return out;
}

std::string GiveUpReasons(const PolicyResult& r) {
  std::vector<std::string> parts;
  for (int i = 1; i <= engine::kMaxReason; ++i) {
    if (r.given_up_by_reason[i] == 0) continue;
    parts.push_back(absl::StrCat(
        engine::ReasonName(static_cast<engine::Reason>(i)), " ",
        Thousands(static_cast<double>(r.given_up_by_reason[i]))));
  }
  return absl::StrJoin(parts, ", ");
}

// Okabe-Ito (colour-blind safe), one per policy in kAllPolicies order.
const char* Colour(Policy p) {
  switch (p) {
    case Policy::kNoBackoff: return "#D55E00";
    case Policy::kExponential: return "#E69F00";
    case Policy::kEqualJitter: return "#CC79A7";
    case Policy::kFullJitter: return "#56B4E9";
    case Policy::kDecorrelatedJitter: return "#009E73";
    case Policy::kFullJitterBudget: return "#0072B2";
    case Policy::kCoordinated: return "#000000";
  }
  return "#888888";
}

std::string Escape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string DescribeEndpoints(const Scenario& s) {
  if (s.endpoints.size() == 1) {
    return absl::StrCat("one endpoint ", EndpointPhrase(s.endpoints[0]));
  }
  bool equal = true;
  std::vector<std::string> shares;
  for (const EndpointSpec& e : s.endpoints) {
    equal = equal && e.share == s.endpoints[0].share;
    shares.push_back(absl::StrFormat("%g", e.share));
  }
  std::string out = absl::StrCat(
      s.endpoints.size(), " endpoints sharing the deliveries ",
      equal ? std::string("equally")
            : absl::StrCat("in shares ", absl::StrJoin(shares, ":")),
      ":");
  for (size_t i = 0; i < s.endpoints.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? " " : "; ", "#", i, " ",
                    EndpointPhrase(s.endpoints[i]));
  }
  return out;
}

std::string DescribeWorkers(const Scenario& s) {
  return s.concurrency > 0
             ? absl::StrCat("a shared pool of ", Thousands(s.concurrency),
                            " workers (a sleeping independent client holds "
                            "its worker, a deferred delivery frees it)")
             : std::string("a worker per delivery (unlimited concurrency)");
}

namespace {

std::string CsvTime(const std::optional<double>& t) {
  return t ? absl::StrFormat("%.1f", *t) : std::string("inf");
}

}  // namespace

std::string DescribeFleet(const Scenario& s) {
  std::string out = s.waiting_admission
                        ? "waiting admission"
                        : "the old client (no waiting admission)";
  const LeaseModel& m = s.leases;
  if (m.agents == 0) return absl::StrCat(out, ", no agents");
  absl::StrAppend(&out, ", ", m.agents, m.agents == 1 ? " agent" : " agents",
                  " with leases (flush every ", Seconds(m.flush_interval),
                  ", ", Seconds(m.push_latency), " one way, ttl ",
                  Seconds(m.ttl));
  if (m.deaf_agents > 0) {
    absl::StrAppend(&out, "; ", m.deaf_agents,
                    m.deaf_agents == 1 ? " whose stream goes quiet"
                                       : " whose streams go quiet",
                    " at the first set change");
  }
  return absl::StrCat(out, ")");
}

std::string CsvCells(const PolicyResult& r) {
  return absl::StrCat(
      PolicyKey(r.policy), ",", std::llround(r.peak_rps_outage), ",",
      std::llround(r.peak_rps_recovery), ",", CsvTime(r.time_to_99_s), ",",
      r.wasted_attempts, ",", r.delivered, ",", r.given_up, ",",
      CsvTime(r.recovery_to_99_s), ",", CsvTime(r.limit_s), ",",
      absl::StrFormat("%.2f", r.messages_per_delivery), ",", r.over_capacity,
      ",", CsvTime(r.recovery_to_100_s));
}

std::string FormatTimeline(const Scenario& s,
                           const std::vector<PolicyResult>& results,
                           int max_rows) {
  const int64_t bucket = std::max<int64_t>(1, absl::ToInt64Nanoseconds(s.bucket));
  const size_t first =
      static_cast<size_t>(absl::ToInt64Nanoseconds(Recovery(s)) / bucket);
  size_t end = first;
  for (const PolicyResult& r : results) {
    end = std::max({end, r.successes_per_bucket.size(),
                    r.over_capacity_per_bucket.size()});
  }
  end = std::min(end, first + static_cast<size_t>(std::max(0, max_rows)));
  std::string out = "| After recovery |";
  std::string align = "|---:|";
  for (const PolicyResult& r : results) {
    absl::StrAppend(&out, " ", PolicyKey(r.policy), ": succeeded | ",
                    PolicyKey(r.policy), ": over capacity |");
    absl::StrAppend(&align, "---:|---:|");
  }
  absl::StrAppend(&out, "\n", align, "\n");
  auto at = [](const std::vector<int64_t>& v, size_t i) {
    return i < v.size() ? v[i] : int64_t{0};
  };
  for (size_t b = first; b < end; ++b) {
    absl::StrAppend(&out, "| ",
                    absl::FormatDuration(absl::Nanoseconds(
                        static_cast<int64_t>(b - first) * bucket)),
                    " |");
    for (const PolicyResult& r : results) {
      absl::StrAppend(&out, " ", at(r.successes_per_bucket, b), " | ",
                      at(r.over_capacity_per_bucket, b), " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string FormatCsv(const std::vector<PolicyResult>& results) {
  std::string out = absl::StrCat(kCsvHeader, "\n");
  for (const PolicyResult& r : results) absl::StrAppend(&out, CsvCells(r), "\n");
  return out;
}

namespace {

// The results table: a title row, the alignment row, one row per result;
// with always-up endpoints beside a failing one, a last column for how
// long the failing one held theirs back.
std::string MarkdownTable(const Scenario& s,
                          const std::vector<PolicyResult>& results) {
  const bool healthy = MixesHealthyAndDown(s);
  std::string out = absl::StrCat(
      "| Policy | Peak attempts/s during outage | Peak attempts/s in the first ",
      Seconds(s.recovery_window),
      " after recovery | Time from recovery to 99% delivered | "
      "Wasted attempts | Delivered | Given up | From recovery (or "
      "Retry-After's end) to 99% | Limit | Coordinator messages/delivery |",
      healthy ? " Always-up endpoints: 99% delivered (from t=0) |" : "",
      "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      healthy ? "---:|" : "", "\n");
  auto time = [](const std::optional<double>& t, const char* none) {
    return t ? absl::StrFormat("%.1f s", *t) : std::string(none);
  };
  for (const PolicyResult& r : results) {
    absl::StrAppend(
        &out, "| ", PolicyTitle(r.policy), " | ", Thousands(r.peak_rps_outage),
        " | ", Thousands(r.peak_rps_recovery), " | ",
        time(r.time_to_99_s, "never"), " | ",
        Thousands(static_cast<double>(r.wasted_attempts)), " | ",
        Thousands(static_cast<double>(r.delivered)), " | ",
        Thousands(static_cast<double>(r.given_up)), " | ",
        time(r.recovery_to_99_s, "never"), " | ",
        time(r.limit_s, "no limit"), " | ",
        r.policy == Policy::kCoordinated
            ? absl::StrFormat("%.2f", r.messages_per_delivery)
            : std::string("-"),
        " |");
    if (healthy) {
      absl::StrAppend(&out, " ", time(r.healthy_time_to_99_s, "never"), " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// The paragraph under the table: the scenario, how rates and peaks are
// measured (with each row's opening-wave peak), what "wasted" counts.
std::string MarkdownLegend(const Scenario& s,
                           const std::vector<PolicyResult>& results) {
  std::string out = absl::StrCat(
      "\nThe scenario: ", Thousands(s.subscriptions),
      " deliveries created at t=0. The endpoints: ", DescribeEndpoints(s),
      ". Workers: ", DescribeWorkers(s), ". Backoff: base ", Seconds(s.base),
      ", cap ", Seconds(s.cap), ", at most ", s.max_attempts,
      " attempts, usefulness horizon ",
      s.horizon > absl::ZeroDuration() ? Seconds(s.horizon)
                                       : std::string("none"),
      ". Every answer takes ", Seconds(s.response_time), ". There are ",
      s.workers,
      " worker processes (one retry budget each in the budget row). The "
      "coordinated row runs with ", DescribeFleet(s), ". Seed ", s.seed,
      ". Rates are attempts per ", Seconds(s.bucket),
      " bucket. The outage peak is taken after the ", Seconds(OpeningWave(s)),
      " opening wave. In it every row sends its first attempts, and the "
      "retries whose intervals are shorter than a bucket. Opening-wave "
      "peaks:");
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? " " : ", ", PolicyKey(results[i].policy),
                    " ", Thousands(results[i].peak_rps_opening));
  }
  int64_t firsts = 0;
  for (const PolicyResult& r : results) {
    firsts = std::max(firsts, r.failed_first_attempts);
  }
  absl::StrAppend(
      &out,
      ". Wasted = retries sent while the endpoint could not answer them. "
      "On top of those, every row sends up to ",
      Thousands(static_cast<double>(firsts)),
      " first attempts into the outage",
      s.concurrency == 0 ? " before any answer can come back" : "", ".\n");
  return out;
}

// One bullet per row that gave up or left deliveries pending, and a blank
// line after them; "" if no row did.
std::string MarkdownGiveUps(const Scenario& s,
                            const std::vector<PolicyResult>& results) {
  std::string out;
  for (const PolicyResult& r : results) {
    if (r.given_up == 0 && r.unfinished == 0) continue;
    absl::StrAppend(&out, "\n- ", PolicyTitle(r.policy), " gave up: ",
                    GiveUpReasons(r));
    if (r.unfinished > 0) {
      absl::StrAppend(&out, "; still pending at the ",
                      Seconds(s.max_virtual_time), " stop: ",
                      Thousands(static_cast<double>(r.unfinished)));
    }
    if (r.disabled_s.has_value()) {
      absl::StrAppend(&out, "; the endpoint disabled at ",
                      absl::StrFormat("%.1f h", *r.disabled_s / 3600),
                      ", attempts after it: ",
                      Thousands(static_cast<double>(r.attempts_after_disable)));
    }
  }
  if (!out.empty()) absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace

std::string FormatMarkdown(const Scenario& s,
                           const std::vector<PolicyResult>& results) {
  return absl::StrCat(MarkdownTable(s, results), MarkdownLegend(s, results),
                      MarkdownGiveUps(s, results));
}

namespace {

// The SVG's size and margins around the plot area (pixels).
constexpr double kW = 1000, kH = 560;
constexpr double kLeft = 80, kRight = 280, kTop = 56, kBottom = 64;
constexpr double kPlotW = kW - kLeft - kRight;
constexpr double kPlotH = kH - kTop - kBottom;

// The plot's axes: x in seconds from 0 to x_max (the last bucket with an
// attempt, at least 10 s past recovery, rounded up to x_step); y in
// attempts/s on a log10 scale from 1/s up to 10^decades (the next power of
// ten above the peak).
struct SvgAxes {
  double bucket_s = 1;   // one bucket's width, seconds
  double per_s = 1;      // a bucket's count times this is attempts/s
  double outage_s = 0;   // the recovery, seconds
  double x_max = 0;
  double x_step = 10;
  int decades = 1;

  double X(double t) const { return kLeft + kPlotW * t / x_max; }
  double Y(double rps) const {
    const double v = std::log10(std::max(1.0, rps));
    return kTop + kPlotH * (1.0 - v / decades);
  }
};

SvgAxes AxesFor(const Scenario& s, const std::vector<PolicyResult>& results) {
  SvgAxes a;
  a.bucket_s = absl::ToDoubleSeconds(s.bucket);
  a.per_s = 1.0 / a.bucket_s;
  size_t buckets = 0;
  double max_rps = 1;
  for (const PolicyResult& r : results) {
    buckets = std::max(buckets, r.attempts_per_bucket.size());
    for (int64_t c : r.attempts_per_bucket) {
      max_rps = std::max(max_rps, c * a.per_s);
    }
  }
  a.outage_s = absl::ToDoubleSeconds(Recovery(s));
  a.x_max = std::max(a.outage_s + 10, buckets * a.bucket_s);
  a.x_step = a.x_max > 200 ? 50 : (a.x_max > 80 ? 20 : 10);
  a.x_max = std::ceil(a.x_max / a.x_step) * a.x_step;
  a.decades = std::max(1, static_cast<int>(std::ceil(std::log10(max_rps))));
  return a;
}

// The <svg> element's opening, a white background, the title and the
// scenario's subtitle.
void AppendSvgHeader(const Scenario& s, std::string* o) {
  absl::StrAppendFormat(
      o,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n",
      static_cast<int>(kW), static_cast<int>(kH), static_cast<int>(kW),
      static_cast<int>(kH));
  absl::StrAppendFormat(o, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
                        static_cast<int>(kW), static_cast<int>(kH));
  absl::StrAppend(
      o, "<text x=\"", kLeft, "\" y=\"24\" font-size=\"17\" font-weight=\"bold\">",
      s.endpoints.size() == 1 ? "Attempts per second against one endpoint"
                              : "Attempts per second, all endpoints",
      "</text>\n");
  absl::StrAppend(
      o, "<text x=\"", kLeft, "\" y=\"43\" font-size=\"12\" fill=\"#444\">",
      Escape(absl::StrCat(
          Thousands(s.subscriptions), " deliveries at t=0; ",
          s.endpoints.size() == 1
              ? absl::StrCat("endpoint ", EndpointPhrase(s.endpoints[0]))
              : absl::StrCat(s.endpoints.size(), " endpoints"),
          "; base ", Seconds(s.base), ", cap ", Seconds(s.cap), "; seed ",
          s.seed)),
      "</text>\n");
}

// Outage shading (every down interval of any endpoint), labelled once,
// and the recovery line (the end of the last one).
void AppendSvgOutages(const Scenario& s, const SvgAxes& ax, std::string* o) {
  bool labelled = false;
  for (const EndpointSpec& e : s.endpoints) {
    for (const DownInterval& d : e.down) {
      const double a = std::min(absl::ToDoubleSeconds(d.start), ax.x_max);
      const double b = std::min(absl::ToDoubleSeconds(d.end), ax.x_max);
      absl::StrAppendFormat(
          o,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
          "fill=\"#f4cccc\" fill-opacity=\"0.6\"/>\n",
          ax.X(a), kTop, ax.X(b) - ax.X(a), kPlotH);
      if (labelled) continue;
      labelled = true;
      absl::StrAppendFormat(
          o,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#a33\" "
          "text-anchor=\"%s\">endpoint down (outage)</text>\n",
          e.down.size() == 1 ? (ax.X(a) + ax.X(b)) / 2 : ax.X(a) + 4, kTop + 16,
          e.down.size() == 1 ? "middle" : "start");
    }
  }
  absl::StrAppendFormat(
      o,
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#a33\" "
      "stroke-dasharray=\"4 3\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#a33\">"
      "recovery</text>\n",
      ax.X(ax.outage_s), kTop, ax.X(ax.outage_s), kTop + kPlotH,
      ax.X(ax.outage_s) + 4, kTop + kPlotH - 8);
}

// The grid with its ticks (a line per decade and per x_step), the plot's
// frame and both axis titles.
void AppendSvgAxes(const Scenario& s, const SvgAxes& ax, std::string* o) {
  for (int d = 0; d <= ax.decades; ++d) {
    const double y = ax.Y(std::pow(10.0, d));
    absl::StrAppendFormat(
        o,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
        kLeft, y, kLeft + kPlotW, y, kLeft - 6, y + 4,
        d == 0 ? "\xE2\x89\xA4" "1" : Thousands(std::pow(10.0, d)));
  }
  for (double t = 0; t <= ax.x_max + 1e-9; t += ax.x_step) {
    absl::StrAppendFormat(
        o,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%d</text>\n",
        ax.X(t), kTop, ax.X(t), kTop + kPlotH, ax.X(t), kTop + kPlotH + 18,
        static_cast<int>(t));
  }
  absl::StrAppendFormat(
      o,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
      "stroke=\"#333\"/>\n",
      kLeft, kTop, kPlotW, kPlotH);
  absl::StrAppendFormat(
      o,
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">"
      "time since the outage began (s)</text>\n",
      kLeft + kPlotW / 2, kH - 20);
  absl::StrAppendFormat(
      o,
      "<text transform=\"translate(22 %.1f) rotate(-90)\" font-size=\"13\" "
      "text-anchor=\"middle\">attempts per second (log scale, %s buckets)"
      "</text>\n",
      kTop + kPlotH / 2, Seconds(s.bucket));
}

// One line per policy: a step per bucket, back to the floor after the
// last attempt; the coordinated row drawn thicker.
void AppendSvgLines(const std::vector<PolicyResult>& results,
                    const SvgAxes& ax, std::string* o) {
  for (const PolicyResult& r : results) {
    std::string pts;
    for (size_t b = 0; b < r.attempts_per_bucket.size(); ++b) {
      const double y = ax.Y(r.attempts_per_bucket[b] * ax.per_s);
      absl::StrAppendFormat(&pts, "%.1f,%.1f %.1f,%.1f ", ax.X(b * ax.bucket_s),
                            y, ax.X((b + 1) * ax.bucket_s), y);
    }
    const double end = r.attempts_per_bucket.size() * ax.bucket_s;
    absl::StrAppendFormat(&pts, "%.1f,%.1f", ax.X(end), ax.Y(0));
    const bool ours = r.policy == Policy::kCoordinated;
    absl::StrAppendFormat(
        o,
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" "
        "stroke-linejoin=\"round\" points=\"%s\"><title>%s</title></polyline>\n",
        Colour(r.policy), ours ? "2.6" : "1.5", pts,
        Escape(PolicyTitle(r.policy)));
  }
}

// The legend right of the plot, with each row's headline numbers so the
// plot stands alone, and what those numbers mean.
void AppendSvgLegend(const std::vector<PolicyResult>& results,
                     std::string* o) {
  const double lx = kLeft + kPlotW + 16;
  double ly = kTop + 6;
  absl::StrAppendFormat(o,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" "
                        "font-weight=\"bold\">policy</text>\n",
                        lx, ly);
  ly += 20;
  for (const PolicyResult& r : results) {
    const std::string numbers = absl::StrCat(
        "wasted ", Thousands(static_cast<double>(r.wasted_attempts)),
        "; 99% delivered ",
        r.time_to_99_s ? absl::StrFormat("at +%.1f s", *r.time_to_99_s)
                       : std::string("never"));
    absl::StrAppendFormat(
        o,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"3\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" fill=\"#555\">%s</text>\n",
        lx, ly - 4, lx + 22, ly - 4, Colour(r.policy), lx + 28, ly,
        Escape(PolicyTitle(r.policy)), lx + 28, ly + 13, Escape(numbers));
    if (r.given_up > 0) {
      absl::StrAppendFormat(
          o,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" fill=\"#555\">"
          "gave up %s</text>\n",
          lx + 28, ly + 25, Thousands(static_cast<double>(r.given_up)));
    }
    ly += r.given_up > 0 ? 50 : 38;
  }
  absl::StrAppendFormat(
      o,
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" fill=\"#555\">"
      "wasted: retries sent while it was down</text>\n"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" fill=\"#555\">"
      "+t: t seconds after recovery</text>\n",
      lx, ly, lx, ly + 13);
}

}  // namespace

std::string RenderSvg(const Scenario& s,
                      const std::vector<PolicyResult>& results) {
  const SvgAxes axes = AxesFor(s, results);
  std::string o;
  AppendSvgHeader(s, &o);
  AppendSvgOutages(s, axes, &o);
  AppendSvgAxes(s, axes, &o);
  AppendSvgLines(results, axes, &o);
  AppendSvgLegend(results, &o);
  absl::StrAppend(&o, "</svg>\n");
  return o;
}

}  // namespace stagger::sim
