// AgentLink: an agent's side of its lease stream to one coordinator
// replica (messages.h; proto/stagger/v1/sync.proto), as plain code on the
// agent's monotonic clock. stagger-agent and a C++ client with leases
// drive it from gRPC (client/internal/sync_session.h); the protocol
// simulator drives the same object from its simulated network.
//
// What it keeps: its copy of the replica's not-clear set (versioned), its
// stream lease, the replica's configuration (each key's initial jitter),
// and the counts it owes (count_book.h).
//
// Local answers (Admit, Report: a decision, or nullopt to ask the
// coordinator). For a key of this replica, while the lease lives and the
// copy is current, and the set covers neither the key nor a prefix of it:
//   * a first attempt before its deadline: PROCEED(INITIAL_JITTER) with a
//     delay drawn over the key's initial jitter, admission kLocalAdmission;
//   * a SUCCESS that was not a probe: DONE(SUCCEEDED).
// Both are counted. The caller decides which replica a key belongs to.
//
// The stream:
//   * OnOpen(now): the messages a new stream starts with (the hello, with
//     the acknowledgement of the copy held, then every count report not
//     yet applied, re-sent in order).
//   * OnDown(down, now): a snapshot replaces the copy; a delta applies if
//     it starts at or before the copy's version (else the copy is dropped
//     and a resync asked for). A renewal extends the lease to AgentLeaseSpan
//     (time_bounds.h) after the moment the renewed message was SENT, if the
//     copy is as new as the renewal's version. Versions only move forward.
//   * OnBroken(): the stream ended; the lease runs on until its end (the
//     replica keeps it until then too) and the copy stays.
//   * Poll(now): the message due now, if any: every RenewEvery() (counts
//     and a renewal), and within kNudge of a delta that added entries (the
//     replica's probes wait for that acknowledgement). RenewEvery() is
//     flush_interval, or half the ttl the replica granted if that is
//     shorter: a lease is renewed at least twice per ttl.
//   * FlushFor(key, now): that key's counts as a message of their own, to
//     go before a failure report on the key (the replica learns the
//     successes before the failure). Applied(seq) says when they were.
// Not thread-safe: the caller locks (one mutex per link is enough).
#ifndef STAGGER_CORE_LEASE_AGENT_LINK_H_
#define STAGGER_CORE_LEASE_AGENT_LINK_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/engine/compiled_config.h"
#include "core/engine/decision.h"
#include "core/lease/count_book.h"
#include "core/lease/messages.h"
#include "core/lease/time_bounds.h"

namespace stagger::lease {

// What the rule for local answers (PickLocalLink) reads of one link.
class LinkView {
 public:
  // Whether a key of this link's replica may be answered here now.
  virtual bool LocalOk(absl::string_view key, absl::Time now) const = 0;
  // Whether the lease lives and the copy is current now: only then is what
  // the copy says of stand-ins (StandsInFor) up to date.
  virtual bool Current(absl::Time now) const = 0;
  // Whether this link's copy says its replica decides `member`'s keys.
  virtual bool StandsInFor(absl::string_view member) const = 0;

 protected:
  ~LinkView() = default;
};

class AgentLink final : public LinkView {
 public:
  static constexpr absl::Duration kNudge = absl::Milliseconds(5);
  // Renewals remembered by message number, awaiting their answer.
  static constexpr size_t kMaxOutstanding = 256;
  // Keys whose initial jitter is remembered (a policy with many overrides
  // is resolved once per key, not per answer).
  static constexpr size_t kJitterCache = 65536;

  struct Options {
    std::string agent_id;      // 1..256 bytes
    uint64_t incarnation = 0;  // != 0
    std::vector<std::string> members;  // the agent's members, by name
    absl::Duration flush_interval = kDefaultFlushInterval;
  };
  // What the agent can tell about this link (status pages, metrics).
  struct Status {
    bool connected = false;
    bool leased = false;      // the lease lives now
    bool in_sync = false;     // the copy is current
    absl::Time lease_until = absl::InfinitePast();
    uint64_t incarnation = 0;  // the replica's, as the copy says
    uint64_t version = 0;
    int64_t entries = 0;
    std::string refusal;
    int64_t counts_dropped = 0;
  };

  explicit AgentLink(Options options);

  // The members the next hello names; true if they changed.
  bool SetMembers(std::vector<std::string> members);
  std::vector<Up> OnOpen(absl::Time now);
  void OnDown(const Down& down, absl::Time now);
  void OnBroken();
  std::optional<Up> Poll(absl::Time now);
  absl::Time NextPoll() const;
  // nullopt: nothing pending for `key`; else the seq to wait for.
  std::optional<Up> FlushFor(absl::string_view key, absl::Time now);
  bool Applied(uint64_t seq) const { return counts_.applied() >= seq; }

  std::optional<engine::Decision> Admit(const engine::AdmitInput& in,
                                        absl::Time now, absl::BitGenRef rng);
  std::optional<engine::Decision> Report(const engine::ReportInput& in,
                                         absl::Time now);
  bool LocalOk(absl::string_view key, absl::Time now) const override;
  bool Current(absl::Time now) const override;
  bool StandsInFor(absl::string_view member) const override;
  // The copy's entry covering `key` (for a fallback that keeps to the
  // set), if any.
  std::optional<NotClearEntry> Covering(absl::string_view key) const;

  Status status(absl::Time now) const;
  bool connected() const { return connected_; }
  // The copy's entries with targets after `after` (in target order), at
  // most `max`, and how many there are after `after` in all.
  struct EntryPage {
    std::vector<NotClearEntry> entries;
    int64_t matched = 0;
  };
  EntryPage ListEntries(absl::string_view after, size_t max) const;

 private:
  Up NewUp(absl::Time now);
  void Apply(const SetSnapshot& s);
  void Apply(const SetDelta& d);
  void Insert(const NotClearEntry& e);
  void Erase(const EntryKey& k);
  void SetConfig(SharedConfig config);
  void Renewed(const Down& down, absl::Time now);
  bool Covered(absl::string_view key) const;
  absl::Duration JitterFor(absl::string_view key);
  // How often a message goes up with counts and a renewal (Poll).
  absl::Duration RenewEvery() const;
  // `now` on the replica's clock, as a lower bound (the latest message
  // down was sent before it arrived).
  absl::Time ReplicaTime(absl::Time now) const;

  Options options_;
  bool connected_ = false;
  uint64_t number_ = 0;  // the last message number sent on this stream
  std::deque<std::pair<uint64_t, absl::Time>> sent_;  // number, when
  absl::Time lease_until_ = absl::InfinitePast();
  absl::Time next_flush_ = absl::InfinitePast();
  absl::Duration granted_ttl_ = absl::ZeroDuration();  // the last renewal's
  bool ack_due_ = false;
  absl::Time ack_due_since_ = absl::InfiniteFuture();
  bool resync_ = false;
  std::string refusal_;
  // The copy of the set.
  bool have_copy_ = false;
  uint64_t incarnation_ = 0;
  uint64_t version_ = 0;
  absl::flat_hash_map<std::string, NotClearEntry> keys_;
  absl::flat_hash_map<std::string, NotClearEntry> prefixes_;
  absl::flat_hash_set<std::string> members_;
  SharedConfig config_;
  std::shared_ptr<const engine::CompiledConfig> compiled_;
  bool uniform_jitter_ = true;
  absl::flat_hash_map<std::string, absl::Duration> jitter_cache_;
  // The latest message down: the replica's time in it, and when it came.
  absl::Time sync_replica_ = absl::InfinitePast();
  absl::Time sync_local_ = absl::InfinitePast();
  uint64_t sync_clock_ = 0;  // the replica incarnation it came from
  CountBook counts_;
};

// Whether an agent may answer `key` locally now, under the lease of its
// owner (`owner`: an index into `links` and `names`, the members): the
// owner's link may (LocalOk), and every other replica's link is Current
// and its set does not say it stands in for that owner. (An agent that
// cannot reach the owner sends its keys to another replica, which decides
// them centrally and may probe them. That replica counts this agent as
// stopped once its lease there ended, so a copy without a live lease
// cannot vouch that no stand-in began.) A key is never answered under the
// lease of a replica that does not own it. A null link (a member without
// a stream) refuses.
bool MayAnswerLocally(absl::Span<const LinkView* const> links,
                      absl::Span<const std::string> names, size_t owner,
                      absl::string_view key, absl::Time now);

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_AGENT_LINK_H_
