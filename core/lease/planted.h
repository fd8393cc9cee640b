// Planted regressions: test-only switches that put a known protocol bug
// back, so that the protocol simulator (bench/protocol_sim) proves it
// catches each one. Every switch is off unless a test turns it on; no
// binary has a flag for them. Each names the hole it reopens.
//
//   lease::Planted().probe_ignores_acks = true;   // in a test only
//   ... run seeds: the simulator must report a violation ...
//   lease::Planted() = {};                        // everything off again
//
// Reads are plain loads of a global: free on the paths that check them.
// Not thread-safe to change while the protocol runs (the simulator is
// single-threaded).
#ifndef STAGGER_CORE_LEASE_PLANTED_H_
#define STAGGER_CORE_LEASE_PLANTED_H_

namespace stagger::lease {

struct PlantedRegressions {
  // A half-open probe does not wait for agents to acknowledge the entry
  // that took its key out of clear.
  bool probe_ignores_acks = false;
  // An acknowledgement is taken to cover every version, even ones the agent
  // has not seen (the old "an ack erases the regrant" hole).
  bool ack_covers_newer = false;
  // The agent applies a set message older than its copy (the old "a stale
  // grant is accepted after a revoke" hole).
  bool agent_takes_stale_set = false;
  // The entry for a key leaving clear is added later, not when its
  // condition changes (the old "check then act" hole).
  bool entry_added_late = false;
  // The agent counts its lease from when the renewal arrived, not from
  // when it sent the message the renewal answers (the old "two clocks").
  bool lease_from_receipt = false;
  // A restarted replica grants leases and admits probes at once (the old
  // "no hold after restart").
  bool no_restart_hold = false;
  // A replica standing in for another member admits probes on its keys at
  // once (the old "no hold after takeover"). Proved by
  // lease.StandInTest, not by the simulator: there the agent's rule (a
  // member's keys locally only with a live lease from every other replica)
  // covers this hold too, so its absence shows no overlap.
  bool no_stand_in_hold = false;
  // The agent answers a member's keys under its lease while its copy of
  // another replica's set has no live lease: a stand-in that replica began
  // may not have reached it (the old "stale copy vouches for no
  // stand-in").
  bool stand_in_trusts_stale_copy = false;
  // Late successes end a run of failures whenever they happened (the old
  // "late counts rewrite history").
  bool late_counts_ignore_order = false;
  // The replica's engine reads the wall clock, which may step back during
  // an outage: a later failure is stamped before an earlier late success,
  // which then ends its run (replica_clock.h).
  bool engine_on_wall_clock = false;
  // The replica orders late successes stamped on another incarnation's
  // clock (before its restart) against its own failures.
  bool counts_ignore_clock = false;
  // The agent drops one count report without saying so.
  bool drop_count_report = false;
  // A drain (or any stream end) throws away answers queued for held calls
  // without giving their probes back: a probe keeps its slot until
  // probe_timeout (the old "a drain throws away agents' answers").
  bool drop_answers_at_stream_end = false;
  // A membership change answers CANCELLED to calls held on a replaced
  // replica instead of re-routing them to the key's new owner.
  bool cancel_on_membership_change = false;
};

PlantedRegressions& Planted();

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_PLANTED_H_
