#include "core/status/decisions_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/engine/decision.h"
#include "core/http/json.h"

namespace stagger::status {

std::string DecisionsJson(const DecisionRing::Window& window) {
  std::string verdicts;
  for (int v = 1; v <= DecisionRing::kVerdicts; ++v) {
    absl::StrAppend(
        &verdicts, v == 1 ? "" : ",",
        http::JsonString(engine::VerdictName(static_cast<engine::Verdict>(v))),
        ":[", absl::StrJoin(window.counts[v - 1], ","), "]");
  }
  return absl::StrCat("{\"last_second\":", window.last_second,
                      ",\"seconds\":", DecisionRing::kSeconds,
                      ",\"verdicts\":{", verdicts, "}}");
}

}  // namespace stagger::status
