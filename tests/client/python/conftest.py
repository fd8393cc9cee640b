"""Shared helpers for the Python client's tests (tests/client/python/):
the shared vectors file, a fake clock and sleep, free loopback ports.
Run by ctest (tests/client/python/CMakeLists.txt) with PYTHONPATH set to
client/python and the generated modules (<build>/client/python/gen)."""

import json
import os
import socket
from typing import Any, Callable, List

from stagger.cancel import Canceller

VECTORS_FILE = os.environ.get("STAGGER_VECTORS") or os.path.join(
    os.path.dirname(__file__), "..", "..", "vectors", "client_vectors.json")


def load_vectors() -> Any:
    with open(VECTORS_FILE, encoding="utf-8") as f:
        return json.load(f)


def expand(v: Any) -> Any:
    """A vector's input value with {"prefix", "repeat", "times", "suffix"}
    strings expanded (recursively through objects)."""
    if isinstance(v, dict):
        if "repeat" in v:
            return v.get("prefix", "") + v["repeat"] * v["times"] + v.get("suffix", "")
        return {k: expand(x) for k, x in v.items()}
    return v


class FakeClock:
    """A clock that moves only when told (Unix seconds)."""

    def __init__(self, start: float = 1767225600.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class FakeSleep:
    """A RetryLoop sleep that advances a FakeClock and records each sleep."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sleeps: List[float] = []
        self.on_sleep: Callable[[float], None] = lambda s: None

    def __call__(self, seconds: float, canceller: Canceller) -> bool:
        if canceller.cancelled:
            return False
        self.sleeps.append(seconds)
        self.on_sleep(seconds)
        self.clock.advance(max(0.0, seconds))
        return not canceller.cancelled


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
