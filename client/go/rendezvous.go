package stagger

import "sort"

// Rendezvous (highest-random-weight) hashing: which replica owns an
// endpoint key -- exactly core/wire/rendezvous.h, which staggerd and every
// client use (tests/vectors/client_vectors.json, rendezvous and
// stable_hash, pins them). StableHash is FNV-1a 64 over the UTF-8 bytes,
// then splitmix64's finaliser; a key's weight for a replica is
// mix(hash(key) ^ hash(name)); the owner has the highest weight, ties going
// to the smaller name (byte-wise). Adding or removing a replica moves only
// its own keys.

func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// StableHash is the stable 64-bit hash of s.
func StableHash(s string) uint64 {
	h := uint64(0xCBF29CE484222325)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001B3
	}
	return mix64(h)
}

// Rendezvous gives the owners of keys over a fixed list of replica names.
// Immutable; safe for concurrent use.
type Rendezvous struct {
	names  []string
	hashes []uint64
}

// NewRendezvous refuses an empty list, an empty or a repeated name with the
// C++ messages ("replicas[1]: the name \"a\" is given twice").
func NewRendezvous(names []string) (*Rendezvous, error) {
	if len(names) == 0 {
		return nil, invalid("replicas: at least one is needed")
	}
	seen := map[string]bool{}
	r := &Rendezvous{}
	for i, n := range names {
		if n == "" {
			return nil, invalid("replicas[%d]: the name is empty", i)
		}
		if seen[n] {
			return nil, invalid("replicas[%d]: the name \"%s\" is given twice", i, n)
		}
		seen[n] = true
		r.names = append(r.names, n)
		r.hashes = append(r.hashes, StableHash(n))
	}
	return r, nil
}

// Rank is every index, most preferred first, for key.
func (r *Rendezvous) Rank(key string) []int {
	h := StableHash(key)
	idx := make([]int, len(r.names))
	w := make([]uint64, len(r.names))
	for i := range idx {
		idx[i], w[i] = i, mix64(h^r.hashes[i])
	}
	sort.Slice(idx, func(a, b int) bool {
		if w[idx[a]] != w[idx[b]] {
			return w[idx[a]] > w[idx[b]]
		}
		return r.names[idx[a]] < r.names[idx[b]]
	})
	return idx
}

// Owner is the index of the name that owns key.
func (r *Rendezvous) Owner(key string) int { return r.Rank(key)[0] }

// Names are the replica names, in the order given.
func (r *Rendezvous) Names() []string { return append([]string(nil), r.names...) }
