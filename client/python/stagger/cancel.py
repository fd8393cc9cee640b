"""Canceller: a one-way latch shared by every wait one event should
interrupt (shutdown, the end of a test) -- the C++ client's Canceller
(client/wait.h).

Contract:
  * cancel() latches and wakes every waiter at once; waits that start after
    it return at once. There is no way back (make a new Canceller).
  * wait(seconds) blocks up to `seconds` (<= 0: not at all) and returns True
    if the whole time passed without cancellation, False if cancelled (also
    when already cancelled on entry).
  * on_cancel(fn) runs fn once at cancel() (at once if already cancelled)
    and returns a handle for remove(): how a waiting RPC is cut short.
    Callbacks run on the cancelling thread and must not block.
Thread-safe.
"""

import threading
from typing import Callable, Dict


class Canceller:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: Dict[int, Callable[[], None]] = {}
        self._next = 0

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for fn in callbacks:
            fn()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        if self._event.is_set():
            return False
        if seconds <= 0:
            return True
        return not self._event.wait(seconds)

    def on_cancel(self, fn: Callable[[], None]) -> int:
        with self._lock:
            if not self._event.is_set():
                self._next += 1
                self._callbacks[self._next] = fn
                return self._next
        fn()
        return 0

    def remove(self, handle: int) -> None:
        with self._lock:
            self._callbacks.pop(handle, None)
