"""Replica: one coordinator replica (or the stagger-agent) as the client
sees it -- its channel and stubs, and whether calls go to it. The health
half of the client's contract (client/coordinator_client.h, replica.h):

  * Up: calls go to it. A call that fails (anything but INVALID_ARGUMENT,
    the caller's bug) marks it down.
  * Down: no call goes to it until recheck_interval (on the client's clock)
    has passed since the last failure; then try_use lets one call through
    as the probe (others go elsewhere meanwhile). Its first answer marks it
    up. When its channel becomes READY while it is down, the next call
    probes it at once.
  * serving: False while its health service (grpc.health.v1, service
    "stagger.v1.RetryCoordinator") answers NOT_SERVING -- a draining
    replica; the router then prefers each key's next choice. Health errors
    change nothing (unreachability shows in the calls).
  * wait_supported: it set Decision.wait_supported in an answer since it
    was last marked up; forgotten when it goes down (a replica that comes
    back may be another build).
The channel reconnects at least every recheck_interval (its maximum
reconnect backoff), with gRPC's own retries off (the client's deadline and
fallback are the retry policy). Thread-safe.
"""

import math
import threading
from typing import Any, Callable, List, Optional, Tuple

import grpc

from stagger.clock import Clock
from stagger.members import Member
from stagger.proto import coordinator_pb2_grpc, health_pb2, health_pb2_grpc

SERVICE = "stagger.v1.RetryCoordinator"


def make_channel(target: str, recheck_interval: float,
                 credentials: Optional[grpc.ChannelCredentials],
                 tls_server_name: Optional[str]) -> grpc.Channel:
    recheck_ms = int(min(max(recheck_interval * 1000, 100), 2 ** 31 - 1))
    options: List[Tuple[str, Any]] = [
        ("grpc.initial_reconnect_backoff_ms", min(recheck_ms, 1000)),
        ("grpc.min_reconnect_backoff_ms", min(recheck_ms, 1000)),
        ("grpc.max_reconnect_backoff_ms", recheck_ms),
        ("grpc.enable_retries", 0),
    ]
    if credentials is None:
        return grpc.insecure_channel(target, options=options)
    if tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls_server_name))
    return grpc.secure_channel(target, credentials, options=options)


class Replica:
    def __init__(self, member: Member, channel: grpc.Channel,
                 recheck_interval: float, clock: Clock,
                 on_change: Optional[Callable[[], None]] = None) -> None:
        self.member = member
        self.stub = coordinator_pb2_grpc.RetryCoordinatorStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)
        self._channel = channel
        self._recheck = recheck_interval
        self._clock = clock
        self._on_change = on_change
        self._lock = threading.Lock()
        self._up = True
        self._next_probe = -math.inf
        self._serving = True
        self._wait_supported = False
        channel.subscribe(self._on_connectivity, try_to_connect=True)

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def up(self) -> bool:
        with self._lock:
            return self._up

    @property
    def serving(self) -> bool:
        return self._serving

    @property
    def wait_supported(self) -> bool:
        with self._lock:
            return self._wait_supported

    def try_use(self) -> bool:
        """Whether a call should go here now (down: this call is the probe,
        if the recheck interval is over)."""
        with self._lock:
            if self._up:
                return True
            now = self._clock.now()
            if now < self._next_probe:
                return False
            self._next_probe = now + self._recheck
            return True

    def mark_up(self, wait_supported: bool = False) -> None:
        with self._lock:
            changed = not self._up
            self._up = True
            self._wait_supported = self._wait_supported or wait_supported
        if changed and self._on_change:
            self._on_change()

    def mark_down(self) -> None:
        with self._lock:
            changed = self._up
            self._up = False
            self._wait_supported = False
            self._next_probe = self._clock.now() + self._recheck
        if changed and self._on_change:
            self._on_change()

    def check_health(self, timeout: float) -> None:
        try:
            resp = self._health.Check(
                health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout)
        except grpc.RpcError:
            return
        serving = resp.status == health_pb2.HealthCheckResponse.SERVING
        was, self._serving = self._serving, serving
        if serving and not was:
            self._probe_now()  # back: its keys may return at once

    def close(self) -> None:
        self._channel.unsubscribe(self._on_connectivity)
        self._channel.close()

    def _on_connectivity(self, state: grpc.ChannelConnectivity) -> None:
        if state is grpc.ChannelConnectivity.READY:
            self._probe_now()

    def _probe_now(self) -> None:
        with self._lock:
            if not self._up:
                self._next_probe = -math.inf
