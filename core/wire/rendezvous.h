// Rendezvous (highest-random-weight) hashing: which replica owns an
// endpoint key. The one place both sides compute it -- the client library
// routes each call to the key's owner, staggerd counts the requests it gets
// for keys it does not own (stagger_misrouted_requests_total).
//
// Contract:
//   * Replicas are identified by stable names (the StatefulSet's pod names
//     stagger-0..N-1, never IPs). Each key's preference order over the
//     names is fixed by (key, name) alone: adding or removing a replica
//     moves only the keys it wins or held, and skipping an unavailable
//     replica moves only its keys, each to its own next choice.
//   * The hash (FNV-1a 64 of the bytes, then a splitmix64 finish, combined
//     per (key, name)) is defined here, not borrowed from absl::Hash, whose
//     values change between builds and processes: every client and server
//     build must agree on it. Changing it moves keys between replicas.
//   * Ties (equal weights) go to the lexically smaller name.
// Immutable after construction; thread-safe.
#ifndef STAGGER_CORE_WIRE_RENDEZVOUS_H_
#define STAGGER_CORE_WIRE_RENDEZVOUS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::wire {

// The stable 64-bit hash of `s`.
uint64_t StableHash(absl::string_view s);

class Rendezvous {
 public:
  // `names`: 1.. distinct, non-empty names. InvalidArgument otherwise,
  // naming the offender.
  static absl::StatusOr<Rendezvous> Create(std::vector<std::string> names);

  size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  // Index of `name`, or size() if it is not a member.
  size_t IndexOf(absl::string_view name) const;

  // The owner of `key`: the index of the name with the highest weight.
  size_t Owner(absl::string_view key) const;
  // Every index, most preferred first (Owner(key) first).
  std::vector<size_t> Rank(absl::string_view key) const;
  // The first index in Rank(key) order for which usable(index) is true, or
  // size() if none is. Computes no more than it needs beyond the weights.
  template <typename Usable>
  size_t FirstUsable(absl::string_view key, Usable usable) const {
    for (size_t i : Rank(key)) {
      if (usable(i)) return i;
    }
    return size();
  }

 private:
  explicit Rendezvous(std::vector<std::string> names);
  uint64_t Weight(uint64_t key_hash, size_t i) const;
  // Whether index a is preferred over index b for this key hash.
  bool Before(uint64_t key_hash, size_t a, size_t b) const;

  std::vector<std::string> names_;
  std::vector<uint64_t> name_hashes_;
};

}  // namespace stagger::wire

#endif  // STAGGER_CORE_WIRE_RENDEZVOUS_H_
