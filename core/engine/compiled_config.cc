#include "core/engine/compiled_config.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace stagger::engine {

std::shared_ptr<const CompiledConfig> CompiledConfig::Compile(
    EngineConfig config, const CompiledConfig* previous) {
  // A configuration that failed validation is a programming error here:
  // the loader validates before it builds or reloads an engine.
  const absl::Status s = ValidateEngineConfig(config);
  if (!s.ok()) {
    std::fprintf(stderr, "stagger engine: invalid configuration: %s\n",
                 std::string(s.message()).c_str());
    std::abort();
  }
  auto compiled = std::make_shared<CompiledConfig>();
  compiled->config = std::move(config);
  compiled->generation = previous == nullptr ? 1 : previous->generation + 1;
  if (previous != nullptr) {
    // Keep one level of history only.
    auto trimmed = std::make_shared<CompiledConfig>();
    trimmed->config = previous->config;
    trimmed->generation = previous->generation;
    compiled->previous = std::move(trimmed);
  }
  return compiled;
}

std::string CompiledConfig::PolicyName(int index) const {
  return index < 0 ? "default" : config.overrides[index].Name();
}

int CompiledConfig::Resolve(absl::string_view key) const {
  for (size_t i = 0; i < config.overrides.size(); ++i) {
    if (config.overrides[i].Matches(key)) return static_cast<int>(i);
  }
  return -1;
}

void CompiledConfig::Rebind(EndpointState& st, absl::string_view key) const {
  const int old_index = st.policy_index;
  const bool had_policy = st.config_generation != 0;
  const CompiledConfig* prev = previous.get();
  // The old parameters are known only if the state was bound to the
  // configuration this one replaced (and its index still names a policy).
  const bool prev_known =
      had_policy && prev != nullptr &&
      prev->generation == st.config_generation &&
      (old_index < 0 ||
       static_cast<size_t>(old_index) < prev->config.overrides.size());
  st.policy_index = static_cast<int16_t>(Resolve(key));
  if (had_policy) {
    st.budget.Reconfigured(
        prev_known ? &prev->Policy(old_index).budget : nullptr,
        Policy(st.policy_index).budget);
  }
  st.config_generation = generation;
}

}  // namespace stagger::engine
