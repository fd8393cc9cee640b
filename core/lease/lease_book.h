// LeaseBook: the leases one agent (or a C++ client with leases on) holds
// from one coordinator replica, the local answers they allow, and the
// counts it owes that replica (proto/stagger/v1/sync.proto, "Leases").
//
// Local answers: Admit/Report return a decision, or nullopt (ask the
// coordinator). Inputs must already be valid (the engine's checks).
//   * A first attempt on an endpoint with a live lease (granted, not
//     expired, not revoked) and allowance left, before its deadline:
//     PROCEED(INITIAL_JITTER) over the lease's initial_jitter, admission
//     kLocalAdmission; counted. A first attempt without a live lease marks
//     the endpoint as wanting one: it is asked for at the next
//     TakeOutgoing, at most once per kAskInterval.
//   * A SUCCESS report on an endpoint with a live lease, unless the
//     attempt was admitted as a probe: DONE(SUCCEEDED); counted.
// A lease is asked for again (renewed) once half its ttl has passed or half
// its allowance is spent, while first attempts keep coming: at most once
// per kRenewInterval (once per kAskInterval for an endpoint with no lease).
//
// Counts are kept per endpoint in kBucket-wide buckets by when they
// happened. TakeOutgoing moves all of them into one numbered CountReport
// (seq 1, 2, ... over the book's life); TakeCountsFor does it for one
// endpoint (before a failure report for it). A report stays unacked until
// OnApplied(seq) covers it; Unacked() is what a new stream sends first, so
// counts are re-sent after a reconnect, never lost, and the replica applies
// each seq once.
//
// Grants: a newer epoch replaces the lease, the same epoch renews it (new
// ttl and allowance from receipt). A revoke ends the leases with its epoch
// or older and queues an acknowledgement.
//
// Thread-safe; time comes from the caller.
#ifndef STAGGER_CORE_LEASE_LEASE_BOOK_H_
#define STAGGER_CORE_LEASE_LEASE_BOOK_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/lease/sync_messages.h"

namespace stagger::lease {

class LeaseBook {
 public:
  // Counts are bucketed this finely (rates read them as what they were).
  static constexpr absl::Duration kBucket = absl::Milliseconds(100);
  // An endpoint without a lease is asked for at most this often ...
  static constexpr absl::Duration kAskInterval = absl::Seconds(1);
  // ... and a lease due for renewal at most this often (a renewal keeps a
  // busy endpoint's calls here, so it is asked for sooner).
  static constexpr absl::Duration kRenewInterval = absl::Milliseconds(100);
  // Unacked reports kept at most (the oldest are dropped beyond: a replica
  // away this long has lost its view of them anyway).
  static constexpr size_t kMaxUnacked = 1024;

  std::optional<engine::Decision> Admit(const engine::AdmitInput& in,
                                        absl::Time now, absl::BitGenRef rng);
  std::optional<engine::Decision> Report(const engine::ReportInput& in,
                                         absl::Time now);

  // What the next message up carries.
  struct Outgoing {
    std::optional<CountReport> counts;
    std::vector<std::string> asks;
    std::vector<LeaseAck> acks;
    bool empty() const {
      return !counts.has_value() && asks.empty() && acks.empty();
    }
  };
  // Asks and acks due now; the pending counts too if `flush`.
  Outgoing TakeOutgoing(absl::Time now, bool flush);
  // `endpoint`'s pending counts as their own report (nullopt: none).
  std::optional<CountReport> TakeCountsFor(absl::string_view endpoint);
  // Reports not yet acknowledged, oldest first.
  std::vector<CountReport> Unacked() const;
  void OnApplied(uint64_t seq);

  void OnGrant(const LeaseGrant& g, absl::Time now);
  void OnRevoke(const LeaseRevoke& r);
  // Ends every lease (the replica is gone for good: its keys moved).
  void DropAll();

  // Live leases now (a gauge); whether `endpoint` has one.
  int LeasesHeld(absl::Time now) const;
  bool HasLease(absl::string_view endpoint, absl::Time now) const;

  // For an operator's view (stagger-agent's status page): the live leases
  // on endpoints after `after` in byte order ("": from the first), at most
  // `max` of them in key order, and how many live leases there are after
  // `after` in all (matched; more pages when above leases.size()). One pass
  // over the book under its lock, as LeasesHeld; copies at most `max`.
  struct HeldLease {
    std::string endpoint;
    uint64_t epoch = 0;
    absl::Time expires;
    uint32_t allowance = 0;  // as granted (or renewed)
    uint32_t left = 0;       // still to use
  };
  struct LeasePage {
    std::vector<HeldLease> leases;
    int64_t matched = 0;
  };
  LeasePage ListLeases(absl::string_view after, size_t max,
                       absl::Time now) const;

 private:
  struct Lease {
    uint64_t epoch = 0;
    absl::Time granted;
    absl::Time expires;
    uint32_t allowance = 0;  // as granted
    uint32_t left = 0;       // still to use
    absl::Duration initial_jitter;
  };
  struct Entry {
    std::optional<Lease> lease;
    std::vector<engine::LateCounts> pending;  // oldest first
    bool wants = false;  // asked for, or due for renewal
    absl::Time last_ask = absl::InfinitePast();
  };
  static bool Live(const Entry& e, absl::Time now);
  // Whether `e` is to be asked for now.
  static bool AskDue(const Entry& e, absl::Time now);
  static void Count(Entry& e, absl::Time now, bool first_attempt);
  // Marks `e` as wanting a (renewed) lease if its lease is half used.
  static void MaybeRenew(Entry& e, absl::Time now);
  CountReport NewReport() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Keep(CountReport r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<CountReport> unacked_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<LeaseAck> acks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_LEASE_BOOK_H_
