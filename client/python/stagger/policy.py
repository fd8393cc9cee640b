"""LocalPolicy: the policy the local fallback decides with. Its defaults are
staggerd's embedded defaults (core/engine/config_ranges.h);
tests/vectors/client_vectors.json (policy_defaults) holds both to them.
Durations in float seconds.

check() refuses values outside the engine's ranges with InvalidArgument
naming the field ("local_policy.backoff_cap: must be in [0.001, 3600],
got 0"); and the engine's relations: cap >= base, open_max >= open_base,
close_after_successes <= half_open_probes.
Immutable.
"""

import dataclasses
import math

from stagger.errors import InvalidArgument


@dataclasses.dataclass(frozen=True)
class LocalPolicy:
    # Decorrelated jitter: min(cap, uniform(base, 3 * previous)).
    backoff_base: float = 0.2
    backoff_cap: float = 30.0
    # Attempts per delivery, counting the first.
    max_attempts: int = 8
    # A first attempt is sent after uniform[0, initial_jitter).
    initial_jitter: float = 0.05
    # A Retry-After above this is honoured as this.
    retry_after_max: float = 30.0
    # The breaker opens after this many failures in a row, or when at
    # least failure_ratio of the attempts counted over `window` failed and
    # there were at least min_throughput of them ...
    consecutive_failures: int = 20
    failure_ratio: float = 0.5
    min_throughput: int = 20
    window: float = 10.0
    # ... for open_base * 2^(trips-1), at most open_max, +-20% jitter; then
    # lets half_open_probes probes through and closes after
    # close_after_successes of them succeed. A probe that never reports
    # frees its slot after probe_timeout.
    open_base: float = 0.25
    open_max: float = 1.0
    half_open_probes: int = 5
    close_after_successes: int = 3
    probe_timeout: float = 10.0
    # Deferred deliveries come back spread over this.
    spread: float = 1.0
    max_key_bytes: int = 512
    # Endpoints remembered at most (least recently used forgotten first).
    max_endpoints: int = 100_000

    def check(self) -> None:
        ranges = (("backoff_base", 0.001, 3600), ("backoff_cap", 0.001, 3600),
                  ("max_attempts", 1, 100), ("initial_jitter", 0, 10),
                  ("retry_after_max", 0, 86400),
                  ("consecutive_failures", 1, 1_000_000),
                  ("min_throughput", 1, 1_000_000_000), ("window", 1, 600),
                  ("open_base", 0.01, 3600), ("open_max", 0.01, 86400),
                  ("half_open_probes", 1, 1000),
                  ("close_after_successes", 1, 1000),
                  ("probe_timeout", 0.1, 600), ("spread", 0, 600),
                  ("max_key_bytes", 1, 4096), ("max_endpoints", 1, 100_000_000))
        for field, lo, hi in ranges:
            v = getattr(self, field)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and
                    lo <= v <= hi):
                raise InvalidArgument("local_policy.%s: must be in [%g, %g], "
                                      "got %r" % (field, lo, hi, v))
        r = self.failure_ratio
        if not (isinstance(r, (int, float)) and 0 < r <= 1):
            raise InvalidArgument("local_policy.failure_ratio: must be in "
                                  "(0, 1], got %r" % (r,))
        for field, bound, sign in (("backoff_cap", "backoff_base", ">="),
                                   ("open_max", "open_base", ">="),
                                   ("close_after_successes",
                                    "half_open_probes", "<=")):
            v, b = getattr(self, field), getattr(self, bound)
            if (v < b) if sign == ">=" else (v > b):
                raise InvalidArgument("local_policy.%s: must be %s %s (%r), "
                                      "got %r" % (field, sign, bound, b, v))
