"""LocalBreaker: the local fallback's circuit breaker for one endpoint, the
engine's (core/engine/circuit_breaker.h) without its failure-ratio
window: it opens after LocalPolicy.consecutive_failures failures in a row.

  CLOSED --N failures in a row--> OPEN for min(open_max, open_base *
  2^(trips-1)) * uniform(0.8, 1.2) --time--> HALF_OPEN: half_open_probes
  probes may go; close_after_successes successes close it (trips
  forgotten); a failure opens it again (one more trip). A probe that does
  not report within probe_timeout frees its slot.
An answer (success or a permanent failure) shows the endpoint is up. Not
thread-safe: the engine holds its lock around every call.
"""

import enum
import random
from typing import Optional

from stagger.policy import LocalPolicy


class BreakerState(enum.Enum):
    CLOSED = 1
    OPEN = 2
    HALF_OPEN = 3


class LocalBreaker:
    def __init__(self) -> None:
        self._close()

    def _close(self) -> None:
        """CLOSED, with everything it learnt forgotten."""
        self.state = BreakerState.CLOSED
        self.open_until = 0.0
        self._failures = 0          # in a row, while CLOSED
        self._trips = 0             # since it last closed
        self._probes = 0            # HALF_OPEN: in flight
        self._successes = 0         # HALF_OPEN: probe successes
        self._last_probe: Optional[float] = None

    def refresh(self, now: float) -> None:
        """OPEN past its time becomes HALF_OPEN."""
        if self.state is BreakerState.OPEN and now >= self.open_until:
            self.state = BreakerState.HALF_OPEN
            self._probes = self._successes = 0
            self._last_probe = now

    def probe_slot_free(self, p: LocalPolicy, now: float) -> bool:
        """HALF_OPEN: whether a probe may go now."""
        if (self._probes > 0 and self._last_probe is not None and
                now - self._last_probe >= p.probe_timeout):
            self._probes = 0  # the probes in flight never reported
        return self._probes + self._successes < p.half_open_probes

    def take_probe(self, now: float) -> None:
        """HALF_OPEN, after probe_slot_free: one more probe in flight."""
        self._probes += 1
        self._last_probe = now

    def on_answer(self, p: LocalPolicy) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self._probes = max(0, self._probes - 1)
            self._successes += 1
            if self._successes >= p.close_after_successes:
                self._close()
        elif self.state is BreakerState.CLOSED:
            self._failures = 0

    def on_failure(self, p: LocalPolicy, now: float, rng: random.Random) -> None:
        if self.state is BreakerState.OPEN:
            return  # sent before the trip: nothing new
        if self.state is BreakerState.CLOSED:
            self._failures += 1
            if self._failures < p.consecutive_failures:
                return
        self._trip(p, now, rng)

    def _trip(self, p: LocalPolicy, now: float, rng: random.Random) -> None:
        self._trips = min(self._trips + 1, 60)
        nominal = min(p.open_max, p.open_base * 2.0 ** (self._trips - 1))
        self.state = BreakerState.OPEN
        self.open_until = now + nominal * rng.uniform(0.8, 1.2)
        self._failures = self._probes = self._successes = 0
