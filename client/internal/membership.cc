#include "client/internal/membership.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::client {

Membership::Membership(MemberSpec spec, MemberResolver resolve,
                       ReplicaFactory make)
    : spec_(std::move(spec)),
      resolve_(std::move(resolve)),
      make_(std::move(make)) {
  std::vector<Member> members = spec_.members;
  if (dns()) {
    absl::StatusOr<std::vector<Member>> found = Resolve();
    if (found.ok()) members = *std::move(found);
  }
  std::shared_ptr<const View> first = MakeView(members, nullptr);
  absl::MutexLock l(&mu_);
  view_ = std::move(first);
}

Membership::~Membership() {
  std::shared_ptr<const View> last;
  {
    absl::MutexLock l(&mu_);
    last.swap(view_);
  }
}

std::shared_ptr<const Membership::View> Membership::view() const {
  absl::MutexLock l(&mu_);
  return view_;
}

std::shared_ptr<const Membership::View> Membership::MakeView(
    const std::vector<Member>& members, const View* old) const {
  auto v = std::make_shared<View>();
  std::vector<std::string> names;
  // Health checks pick among several replicas; one has no alternative.
  const bool health_checks = members.size() > 1 || dns();
  for (const Member& m : members) {
    names.push_back(m.name);
    std::shared_ptr<Replica> kept;
    for (size_t i = 0; old != nullptr && i < old->replicas.size(); ++i) {
      const Replica& r = *old->replicas[i];
      if (r.name() == m.name && r.target() == m.target) kept = old->replicas[i];
    }
    v->replicas.push_back(kept != nullptr ? std::move(kept)
                                          : make_(m, health_checks));
  }
  // Lease streams name the members (a replica leases only to agents that
  // see the same ones).
  for (const std::shared_ptr<Replica>& r : v->replicas) {
    if (r->sync() != nullptr) r->sync()->SetMembers(names);
  }
  if (!names.empty()) v->ring = *wire::Rendezvous::Create(std::move(names));
  return v;
}

absl::StatusOr<std::vector<Member>> Membership::Resolve() const {
  absl::StatusOr<std::vector<Member>> found =
      resolve_ ? resolve_(spec_.dns_host, spec_.dns_port)
               : ResolveDnsMembers(spec_.dns_host, spec_.dns_port);
  if (!found.ok()) return found;
  if (found->empty()) {
    return absl::UnavailableError(absl::StrCat(
        "dns:///", spec_.dns_host, ":", spec_.dns_port, ": no members"));
  }
  return SortedByName(*std::move(found));
}

void Membership::Refresh() {
  if (!dns()) return;
  absl::StatusOr<std::vector<Member>> found = Resolve();
  if (!found.ok()) return;  // keep the members last seen
  std::shared_ptr<const View> old = view();
  bool same = found->size() == old->replicas.size();
  for (size_t i = 0; same && i < found->size(); ++i) {
    same = (*found)[i].name == old->replicas[i]->name() &&
           (*found)[i].target == old->replicas[i]->target();
  }
  if (same) return;
  std::shared_ptr<const View> next = MakeView(*found, old.get());
  absl::MutexLock l(&mu_);
  view_ = std::move(next);
}

size_t Membership::Pick(const View& v, absl::string_view key,
                        const Usable& usable) {
  if (v.replicas.size() == 1) return usable(0, false) ? 0 : 1;
  if (v.replicas.empty()) return 0;
  const std::vector<size_t> rank = v.ring->Rank(key);
  for (bool serving_only : {true, false}) {
    for (size_t i : rank) {
      if (usable(i, serving_only)) return i;
    }
  }
  return v.replicas.size();
}

std::shared_ptr<Replica> Membership::Route(absl::string_view key) const {
  std::shared_ptr<const View> v = view();
  const size_t i = Pick(*v, key, [&](size_t r, bool serving_only) {
    Replica& rep = *v->replicas[r];
    if (serving_only && !rep.serving()) return false;
    return rep.TryUse();
  });
  return i < v->replicas.size() ? v->replicas[i] : nullptr;
}

std::shared_ptr<Replica> Membership::Peek(absl::string_view key) const {
  std::shared_ptr<const View> v = view();
  const size_t i = Pick(*v, key, [&](size_t r, bool serving_only) {
    const Replica& rep = *v->replicas[r];
    return rep.up() && (!serving_only || rep.serving());
  });
  return i < v->replicas.size() ? v->replicas[i] : nullptr;
}

bool Membership::AnyUp() const {
  std::shared_ptr<const View> v = view();
  if (v == nullptr) return false;  // under construction or destruction
  for (const auto& r : v->replicas) {
    if (r->up()) return true;
  }
  return false;
}

}  // namespace stagger::client
