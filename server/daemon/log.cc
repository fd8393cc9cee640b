#include "server/daemon/log.h"

#include <cstdio>

namespace stagger::daemon {

void Log(absl::string_view line) {
  std::fprintf(stderr, "staggerd: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

}  // namespace stagger::daemon
