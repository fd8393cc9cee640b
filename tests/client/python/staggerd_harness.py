"""The real staggerd for the Python client's integration tests: started on
127.0.0.1 port 0 (or a Unix socket) with metrics off, its "listening on"
line read for the port, stopped (SIGTERM, then SIGKILL) or killed. A child
gets SIGKILL if the test process dies, so none is left behind."""

import ctypes
import os
import re
import signal
import subprocess
import tempfile
import time
from typing import Optional

READY = re.compile(r"staggerd: listening on (\S+)")


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


class Staggerd:
    def __init__(self, binary: str, address: str = "127.0.0.1:0",
                 config: Optional[str] = None) -> None:
        self.log_path = os.path.join(tempfile.mkdtemp(prefix="stagger-py-"),
                                     "staggerd.log")
        self._log = open(self.log_path, "w")
        argv = [binary, "--address", address, "--metrics_address", ""]
        if config:
            argv.append("--config=" + config)
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        listening = self._wait_ready(timeout=60)
        self.target = address if address.startswith("unix:") else listening

    def output(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = READY.search(self.output())
            if m:
                return m.group(1)
            time.sleep(0.05)
        self.kill()
        raise AssertionError("staggerd did not start:\n" + self.output())

    def kill(self) -> None:
        """SIGKILL: gone at once, as a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> Optional[int]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode
