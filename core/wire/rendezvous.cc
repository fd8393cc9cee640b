#include "core/wire/rendezvous.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagger::wire {
namespace {

// splitmix64's finalizer: a bijective mix with full avalanche.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t StableHash(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return Mix(h);
}

absl::StatusOr<Rendezvous> Rendezvous::Create(std::vector<std::string> names) {
  if (names.empty()) {
    return absl::InvalidArgumentError("replicas: at least one is needed");
  }
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicas[", i, "]: the name is empty"));
    }
    if (!seen.insert(names[i]).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicas[", i, "]: the name \"", names[i], "\" is given twice"));
    }
  }
  return Rendezvous(std::move(names));
}

Rendezvous::Rendezvous(std::vector<std::string> names)
    : names_(std::move(names)) {
  name_hashes_.reserve(names_.size());
  for (const std::string& n : names_) name_hashes_.push_back(StableHash(n));
}

size_t Rendezvous::IndexOf(absl::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  return names_.size();
}

uint64_t Rendezvous::Weight(uint64_t key_hash, size_t i) const {
  return Mix(key_hash ^ name_hashes_[i]);
}

bool Rendezvous::Before(uint64_t key_hash, size_t a, size_t b) const {
  const uint64_t wa = Weight(key_hash, a), wb = Weight(key_hash, b);
  if (wa != wb) return wa > wb;
  return names_[a] < names_[b];
}

size_t Rendezvous::Owner(absl::string_view key) const {
  const uint64_t h = StableHash(key);
  size_t best = 0;
  for (size_t i = 1; i < names_.size(); ++i) {
    if (Before(h, i, best)) best = i;
  }
  return best;
}

std::vector<size_t> Rendezvous::Rank(absl::string_view key) const {
  const uint64_t h = StableHash(key);
  std::vector<size_t> order(names_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return Before(h, a, b); });
  return order;
}

}  // namespace stagger::wire
