// Admission tokens: which admission let an attempt go (decision.h's
// constants; proto Decision.admission / ReportRequest.admission). A worker
// echoes the token of the Admit in the attempt's Report; a half-open
// breaker counts only the successes of its own probes, so a success of an
// attempt admitted before the trip, under a lease or by a client's local
// fallback never closes it.
//
// A probe's token is kProbeAdmissionBit | salt << 16 | the breaker's
// half-open generation. The salt is the engine's (random per engine), so a
// client's local engine and a coordinator, or a coordinator before and
// after a restart, never mistake each other's probes. kNoAdmission (not
// echoed) is read as before tokens existed: possibly a probe.
// Pure functions.
#ifndef STAGGER_CORE_ENGINE_ADMISSION_H_
#define STAGGER_CORE_ENGINE_ADMISSION_H_

#include <cstdint>

#include "core/engine/decision.h"

namespace stagger::engine {

inline uint64_t ProbeAdmission(uint32_t salt, uint16_t generation) {
  return kProbeAdmissionBit | (uint64_t{salt & 0x7fffffff} << 16) |
         generation;
}

// Whether a success with `admission` counts as a probe of the half-open
// period `generation` of an engine salted `salt`.
inline bool CountsAsProbe(uint64_t admission, uint32_t salt,
                          uint16_t generation) {
  return admission == kNoAdmission ||
         admission == ProbeAdmission(salt, generation);
}

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ADMISSION_H_
