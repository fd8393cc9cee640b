#include "bench/protocol_sim/planted_names.h"

namespace stagger::protocol_sim {

const std::vector<PlantedSwitch>& PlantedSwitches() {
  using P = lease::PlantedRegressions;
  static const auto* switches = new std::vector<PlantedSwitch>{
      {"probe_ignores_acks", &P::probe_ignores_acks,
       "a probe does not wait for acknowledgements"},
      {"ack_covers_newer", &P::ack_covers_newer,
       "an acknowledgement covers versions the agent never saw"},
      {"agent_takes_stale_set", &P::agent_takes_stale_set,
       "the agent applies a set message older than its copy"},
      {"entry_added_late", &P::entry_added_late,
       "check then act: a key's entry is added after the change"},
      {"lease_from_receipt", &P::lease_from_receipt,
       "two clocks: the lease counts from the renewal's arrival"},
      {"no_restart_hold", &P::no_restart_hold,
       "a restarted replica grants and probes at once"},
      {"stand_in_trusts_stale_copy", &P::stand_in_trusts_stale_copy,
       "an unleased copy of a stand-in's set vouches for no stand-in"},
      {"late_counts_ignore_order", &P::late_counts_ignore_order,
       "late counts end a run of failures that came after them"},
      {"engine_on_wall_clock", &P::engine_on_wall_clock,
       "the replica's engine stamps failures on a wall clock that steps"},
      {"counts_ignore_clock", &P::counts_ignore_clock,
       "late successes on an old incarnation's clock end a run"},
      {"drop_count_report", &P::drop_count_report,
       "a count report is dropped without a word"},
      {"drop_answers_at_stream_end", &P::drop_answers_at_stream_end,
       "a stream's end throws away answers, probes and all"},
      {"cancel_on_membership_change", &P::cancel_on_membership_change,
       "a replaced replica's held calls are cancelled, not sent on"},
  };
  return *switches;
}

bool TurnOn(absl::string_view name) {
  for (const PlantedSwitch& s : PlantedSwitches()) {
    if (name == s.name) {
      lease::Planted().*(s.field) = true;
      return true;
    }
  }
  return false;
}

}  // namespace stagger::protocol_sim
