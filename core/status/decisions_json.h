// DecisionsJson(window): a DecisionRing's window as the status pages'
// charts read it (staggerd's and stagger-agent's /api/decisions):
// {"last_second": Unix s, "seconds": DecisionRing::kSeconds,
//  "verdicts": {"PROCEED": [counts, oldest first], "DEFER", "GIVE_UP",
//  "DONE"}}. Pure; thread-safe.
#ifndef STAGGER_CORE_STATUS_DECISIONS_JSON_H_
#define STAGGER_CORE_STATUS_DECISIONS_JSON_H_

#include <string>

#include "core/status/decision_ring.h"

namespace stagger::status {

std::string DecisionsJson(const DecisionRing::Window& window);

}  // namespace stagger::status

#endif  // STAGGER_CORE_STATUS_DECISIONS_JSON_H_
