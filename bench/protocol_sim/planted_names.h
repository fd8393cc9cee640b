// The planted regressions by name (core/lease/planted.h), for the
// simulator's --planted flag and its self-test.
#ifndef STAGGER_BENCH_PROTOCOL_SIM_PLANTED_NAMES_H_
#define STAGGER_BENCH_PROTOCOL_SIM_PLANTED_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/lease/planted.h"

namespace stagger::protocol_sim {

// The seeds CI runs clean (protocol_sim.seeds: seeds 1 to kCiSeeds). Each
// planted regression must be caught among them.
inline constexpr int64_t kCiSeeds = 10000;

struct PlantedSwitch {
  const char* name;
  bool lease::PlantedRegressions::*field;
  const char* hole;  // what it reopens
};

// Every switch this simulator must catch (all of planted.h's but
// no_stand_in_hold, which lease.StandInTest proves).
const std::vector<PlantedSwitch>& PlantedSwitches();
// Turns on the one named; false if there is none by that name.
bool TurnOn(absl::string_view name);

}  // namespace stagger::protocol_sim

#endif  // STAGGER_BENCH_PROTOCOL_SIM_PLANTED_NAMES_H_
