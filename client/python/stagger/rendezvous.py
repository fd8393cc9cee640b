"""Rendezvous (highest-random-weight) hashing: which replica owns an
endpoint key -- exactly core/wire/rendezvous.h, which staggerd and the C++
client use (tests/vectors/client_vectors.json, rendezvous and stable_hash,
pins both).

Contract:
  * stable_hash(s): FNV-1a 64 over the UTF-8 bytes, then splitmix64's
    finaliser. A key's weight for a replica is mix(hash(key) ^ hash(name));
    the owner has the highest weight, ties going to the smaller name
    (byte-wise). Adding or removing a replica moves only its own keys.
  * Rendezvous.create refuses an empty list, an empty or a repeated name
    (InvalidArgument "replicas...", the C++ messages).
Immutable after construction; thread-safe.
"""

from typing import List, Sequence, Union

from stagger.errors import InvalidArgument

_MASK = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def _mix(x: int) -> int:
    """splitmix64's finaliser (with its increment)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def stable_hash(s: Union[str, bytes]) -> int:
    """The stable 64-bit hash of `s` (str: its UTF-8 bytes)."""
    data = s.encode("utf-8") if isinstance(s, str) else s
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return _mix(h)


class Rendezvous:
    """Key owners over a fixed list of replica names."""

    def __init__(self, names: Sequence[str]) -> None:
        if not names:
            raise InvalidArgument("replicas: at least one is needed")
        for i, name in enumerate(names):
            if not name:
                raise InvalidArgument("replicas[%d]: the name is empty" % i)
            if name in names[:i]:
                raise InvalidArgument(
                    'replicas[%d]: the name "%s" is given twice' % (i, name))
        self._names = list(names)
        self._name_bytes = [n.encode("utf-8") for n in self._names]
        self._hashes = [stable_hash(b) for b in self._name_bytes]

    @property
    def names(self) -> List[str]:
        return list(self._names)

    def rank(self, key: str) -> List[int]:
        """Every index, most preferred first."""
        h = stable_hash(key)
        return sorted(range(len(self._names)),
                      key=lambda i: (-_mix(h ^ self._hashes[i]),
                                     self._name_bytes[i]))

    def owner(self, key: str) -> int:
        """The index of the name that owns `key`."""
        return self.rank(key)[0]
