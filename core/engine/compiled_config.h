// CompiledConfig: one validated EngineConfig as the decision path reads it.
//
// A configuration gets a generation number (1, 2, ... in the order they
// were compiled) and keeps the one it replaced (one level only) so that an
// endpoint can tell whether its windows' widths changed. Bind() ties an
// endpoint's state to this configuration: on the first decision after a
// change it re-resolves the endpoint's policy (the first matching override,
// else the default) and lets the budget decide whether its window survives
// (RetryBudget::Reconfigured); later decisions reuse the resolved index.
// Immutable once compiled: shared by the table's shards, read under a
// shard's lock.
#ifndef STAGGER_CORE_ENGINE_COMPILED_CONFIG_H_
#define STAGGER_CORE_ENGINE_COMPILED_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

struct CompiledConfig {
  EngineConfig config;
  uint32_t generation = 0;
  // The configuration this one replaced (its own `previous` is empty).
  std::shared_ptr<const CompiledConfig> previous;

  // `config` must pass ValidateEngineConfig (CHECK-fails otherwise: the
  // loader validates first). `previous` is the configuration in force, or
  // nullptr for the first one.
  static std::shared_ptr<const CompiledConfig> Compile(
      EngineConfig config, const CompiledConfig* previous);

  // -1: the default policy; otherwise the index of an override.
  const PolicyParams& Policy(int index) const {
    return index < 0 ? config.default_policy : config.overrides[index].policy;
  }
  // "default" or the override's Name().
  std::string PolicyName(int index) const;
  // The first override matching `key`, or -1.
  int Resolve(absl::string_view key) const;
  // The policy index `st` (with key `key`) has under this configuration,
  // without changing it (inspection).
  int IndexFor(const EndpointState& st, absl::string_view key) const {
    return st.config_generation == generation ? st.policy_index
                                              : Resolve(key);
  }

  // Binds `st` to this configuration (see the top of this file) and returns
  // its policy. A state with config_generation 0 is new: nothing to keep.
  const PolicyParams& Bind(EndpointState& st, absl::string_view key) const {
    if (st.config_generation != generation) Rebind(st, key);
    return Policy(st.policy_index);
  }

 private:
  void Rebind(EndpointState& st, absl::string_view key) const;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_COMPILED_CONFIG_H_
