// Membership: the coordinator replicas one CoordinatorClient talks to, and
// which of them a call about a key goes to (coordinator_client.h,
// "Sharding").
//
//   * A View is one membership: replicas[i] is named ring->names()[i]. It
//     is immutable; a call holds the view it started with, so a membership
//     change never pulls a replica from under a call.
//   * Refresh() re-resolves a dns:/// target and installs a new view when
//     the members changed, keeping the replicas (and so the channels) whose
//     name and target are the same. An error keeps the members last seen.
//   * Pick(view, key, usable): the first replica in the key's rendezvous
//     order that `usable` accepts, serving replicas first; view.size() when
//     none does. Route(key) is Pick with Replica::TryUse (which may claim a
//     down replica's probe): the replica the call goes to, or null (decide
//     locally).
// Thread-safe.
#ifndef STAGGER_CLIENT_INTERNAL_MEMBERSHIP_H_
#define STAGGER_CLIENT_INTERNAL_MEMBERSHIP_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/replica.h"
#include "client/internal/target_parser.h"
#include "core/wire/rendezvous.h"

namespace stagger::client {

class Membership {
 public:
  struct View {
    std::optional<wire::Rendezvous> ring;  // none while there are no members
    std::vector<std::shared_ptr<Replica>> replicas;
  };
  // Makes the replica for a member; `health_checks` when there is a choice
  // of replica (several members, or a dns:/// target).
  using ReplicaFactory = std::function<std::shared_ptr<Replica>(
      const Member& member, bool health_checks)>;
  // Whether a call may go to replica i now; `serving_only` skips replicas
  // whose health service says NOT_SERVING.
  using Usable = std::function<bool(size_t i, bool serving_only)>;

  // `spec` from ParseMembers; `resolve` is used for a dns:/// spec (null:
  // ResolveDnsMembers). The first view is built here (a dns:/// target is
  // resolved once; no members if that fails).
  Membership(MemberSpec spec, MemberResolver resolve, ReplicaFactory make);
  // Drops the view: every replica's watcher stops before this returns
  // (unless a call still holds the view).
  ~Membership();

  std::shared_ptr<const View> view() const;
  bool dns() const { return !spec_.dns_host.empty(); }
  void Refresh();

  static size_t Pick(const View& v, absl::string_view key,
                     const Usable& usable);
  std::shared_ptr<Replica> Route(absl::string_view key) const;
  // The replica Route would pick among those up now, without claiming a
  // down replica's probe (for answers that call no one); null if none.
  std::shared_ptr<Replica> Peek(absl::string_view key) const;
  // Whether any replica takes calls now.
  bool AnyUp() const;

 private:
  // The members of the dns:/// target now, sorted by name, one per name.
  absl::StatusOr<std::vector<Member>> Resolve() const;
  std::shared_ptr<const View> MakeView(const std::vector<Member>& members,
                                       const View* old) const;

  const MemberSpec spec_;
  const MemberResolver resolve_;
  const ReplicaFactory make_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const View> view_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_MEMBERSHIP_H_
