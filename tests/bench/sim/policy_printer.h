// gtest prints a sim::Policy by its key ("full_jitter"), not as a
// "1-byte object", in test names and failure messages.
#ifndef STAGGER_TESTS_BENCH_SIM_POLICY_PRINTER_H_
#define STAGGER_TESTS_BENCH_SIM_POLICY_PRINTER_H_

#include <ostream>

#include "bench/sim/sim.h"

namespace stagger::sim {

inline void PrintTo(Policy p, std::ostream* os) { *os << PolicyKey(p); }

}  // namespace stagger::sim

#endif  // STAGGER_TESTS_BENCH_SIM_POLICY_PRINTER_H_
