#include "server/service/ownership.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stagger::service {

absl::StatusOr<std::optional<Ownership>> Ownership::FromFlags(
    absl::string_view replicas, absl::string_view replica_name,
    absl::string_view hostname) {
  if (absl::StripAsciiWhitespace(replicas).empty()) return std::nullopt;
  std::vector<std::string> names;
  for (absl::string_view n : absl::StrSplit(replicas, ',')) {
    names.emplace_back(absl::StripAsciiWhitespace(n));
  }
  absl::StatusOr<wire::Rendezvous> members =
      wire::Rendezvous::Create(std::move(names));
  if (!members.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", members.status().message()));
  }
  const absl::string_view self =
      replica_name.empty() ? hostname : replica_name;
  if (self.empty()) {
    return absl::InvalidArgumentError(
        "--replica_name: empty, and HOSTNAME is not set either");
  }
  const size_t index = members->IndexOf(self);
  if (index == members->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replica_name: \"", self, "\" is not one of --replicas (",
        replicas, ")"));
  }
  return Ownership(*std::move(members), index);
}

}  // namespace stagger::service
