"""Time for the client: a Clock gives the current instant as float Unix
seconds. RealClock is the wall clock (time.time()): instants travel to the
coordinator as Timestamps (deadline, first_attempt_time). Tests inject a
fake clock (anything with now()).
"""

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """The current instant, Unix seconds."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()


REAL_CLOCK = RealClock()
