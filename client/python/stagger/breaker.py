"""LocalBreaker: the local fallback's circuit breaker for one endpoint, the
engine's (core/engine/circuit_breaker.h) as docs/CLIENT_CONTRACT.md's
fallback subset states it, for this process's view of the endpoint:

  CLOSED --consecutive_failures failures in a row, or failures >=
  failure_ratio of the attempts counted over the last `window` (five
  slots of window/5, numbered from the Unix epoch) once there are at least
  min_throughput of them--> OPEN for min(open_max, open_base *
  2^(trips-1)) * (0.8 + 0.4 u) --time--> HALF_OPEN: half_open_probes
  probes may go; close_after_successes answers close it (everything
  forgotten); a failure opens it again (one more trip). Probes that do not
  report within probe_timeout of the latest one free their slots.
An answer (success or a permanent failure) shows the endpoint is up; in
HALF_OPEN every answer counts as a probe's (the subset has no probe
tokens). Not thread-safe: the engine holds its lock around every call.
"""

import enum
import math
from typing import Callable, Dict, Tuple

from stagger.policy import LocalPolicy

SLOTS = 5


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
        self._last_probe = 0.0      # HALF_OPEN: the latest probe's admission
        self._window: Dict[int, Tuple[int, int]] = {}  # slot -> (attempts, failures)

    def refresh(self, now: float) -> None:
        """OPEN past its time becomes HALF_OPEN."""
        if self.state is BreakerState.OPEN and now >= self.open_until:
            self.state = BreakerState.HALF_OPEN
            self._probes = self._successes = 0
            self._last_probe = now

    def probe_slot_free(self, p: LocalPolicy, now: float) -> bool:
        """HALF_OPEN: whether a probe may go now."""
        if self._probes > 0 and now - self._last_probe >= p.probe_timeout:
            self._probes = 0  # the probes in flight never reported
        free = self._probes + self._successes < p.half_open_probes
        if free:
            self._last_probe = now  # as the engine: a free slot is asked for
        return free

    def take_probe(self, now: float) -> None:
        """HALF_OPEN, after probe_slot_free: one more probe in flight."""
        self._probes += 1
        self._last_probe = now

    def on_answer(self, p: LocalPolicy, now: float) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self._probes = max(0, self._probes - 1)
            self._successes += 1
            if self._successes >= p.close_after_successes:
                self._close()
        elif self.state is BreakerState.CLOSED:
            self._failures = 0
            self._count(p, now, failure=False)

    def on_failure(self, p: LocalPolicy, now: float,
                   uniform: Callable[[], float]) -> None:
        if self.state is BreakerState.OPEN:
            return  # sent before the trip: nothing new
        if self.state is BreakerState.CLOSED:
            self._failures += 1
            attempts, failures = self._count(p, now, failure=True)
            by_ratio = (attempts >= p.min_throughput and
                        failures >= p.failure_ratio * attempts)
            if self._failures < p.consecutive_failures and not by_ratio:
                return
        self._trip(p, now, uniform)

    def _count(self, p: LocalPolicy, now: float,
               failure: bool) -> Tuple[int, int]:
        """Counts one attempt in now's slot; the window's sums."""
        slot = math.floor(now / (p.window / SLOTS))
        for old in [s for s in self._window if s <= slot - SLOTS]:
            del self._window[old]
        a, f = self._window.get(slot, (0, 0))
        self._window[slot] = (a + 1, f + (1 if failure else 0))
        return (sum(c[0] for c in self._window.values()),
                sum(c[1] for c in self._window.values()))

    def _trip(self, p: LocalPolicy, now: float,
              uniform: Callable[[], float]) -> None:
        self._trips = min(self._trips + 1, 60)
        nominal = min(p.open_max, p.open_base * 2.0 ** (self._trips - 1))
        self.state = BreakerState.OPEN
        self.open_until = now + nominal * (0.8 + 0.4 * uniform())
        self._failures = self._probes = self._successes = 0
        self._window = {}
