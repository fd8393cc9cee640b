// Rendezvous (highest-random-weight) hashing: which coordinator replica
// owns an endpoint key. Bit for bit the hashing of staggerd and the C++
// client (core/wire/rendezvous.cc): FNV-1a 64 over the UTF-8 bytes, a
// splitmix64 finish, weight(key, name) = mix(hash(key) ^ hash(name)), the
// highest weight wins, ties go to the lexically (bytewise) smaller name.
// Changing any of it moves keys between replicas.
//
// Immutable after construction. BigInt arithmetic, masked to 64 bits.
const MASK64 = (1n << 64n) - 1n;
const encoder = new TextEncoder();

// splitmix64's finalizer.
function mix(x: bigint): bigint {
  x = (x + 0x9e3779b97f4a7c15n) & MASK64;
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return x ^ (x >> 31n);
}

// The stable 64-bit hash of `s` (its UTF-8 bytes).
export function stableHash(s: string): bigint {
  let h = 0xcbf29ce484222325n; // FNV-1a 64 offset basis
  for (const byte of encoder.encode(s)) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK64; // FNV-1a 64 prime
  }
  return mix(h);
}

// Bytewise comparison of UTF-8 strings (std::string's operator<).
export function bytewiseLess(a: string, b: string): boolean {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")) < 0;
}

export class Rendezvous {
  private readonly nameHashes: bigint[];

  // `names`: one or more distinct, non-empty names (throws otherwise,
  // naming the offender, as wire::Rendezvous::Create).
  constructor(readonly names: readonly string[]) {
    if (names.length === 0) throw new Error("replicas: at least one is needed");
    const seen = new Set<string>();
    names.forEach((n, i) => {
      if (n === "") throw new Error(`replicas[${i}]: the name is empty`);
      if (seen.has(n)) throw new Error(`replicas[${i}]: the name "${n}" is given twice`);
      seen.add(n);
    });
    this.nameHashes = names.map(stableHash);
  }

  // Index of the owner of `key`.
  owner(key: string): number {
    return this.rank(key)[0]!;
  }

  // Every index, most preferred first.
  rank(key: string): number[] {
    const h = stableHash(key);
    const weights = this.nameHashes.map((nh) => mix(h ^ nh));
    return this.names
      .map((_, i) => i)
      .sort((a, b) => {
        if (weights[a] !== weights[b]) return weights[a]! > weights[b]! ? -1 : 1;
        return bytewiseLess(this.names[a]!, this.names[b]!) ? -1 : 1;
      });
  }
}
