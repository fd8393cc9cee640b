// stagger-metric-catalog: prints the metric catalog (metric_catalog.h) as
// JSON, for the checks outside C++ (tests/deploy holds the Prometheus rules
// and the Grafana dashboard to it; tests/metrics/live_scrape_test.py holds
// staggerd's /metrics page to it).
//
//   stagger-metric-catalog              JSON on stdout
//   stagger-metric-catalog --out FILE   JSON written to FILE
//
// Exit codes: 0 written, 1 FILE cannot be written, 2 bad arguments.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/metrics/metric_catalog.h"

int main(int argc, char** argv) {
  const std::string json = stagger::metrics::CatalogJson();
  if (argc == 1) {
    std::fputs(json.c_str(), stdout);
    return 0;
  }
  if (argc != 3 || std::strcmp(argv[1], "--out") != 0) {
    std::fprintf(stderr, "usage: %s [--out FILE]\n", argv[0]);
    return 2;
  }
  std::FILE* f = std::fopen(argv[2], "w");
  bool ok = f != nullptr &&
            std::fwrite(json.data(), 1, json.size(), f) == json.size();
  if (f != nullptr && std::fclose(f) != 0) ok = false;
  if (!ok) {
    std::fprintf(stderr, "stagger-metric-catalog: cannot write %s: %s\n",
                 argv[2], std::strerror(errno));
    return 1;
  }
  return 0;
}
