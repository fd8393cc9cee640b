"""Replica: one coordinator replica (or the stagger-agent) as the client
sees it -- its channel and stubs, and whether calls go to it. The health
half of the client's contract (client/coordinator_client.h, replica.h):

  * Up: calls go to it. A call that fails (anything but INVALID_ARGUMENT,
    the caller's bug) marks it down.
  * Down: no call goes to it until recheck_interval (on the client's clock)
    has passed since the last failure; then try_use lets one call through
    as the probe (others go elsewhere meanwhile). Its first answer marks it
    up. When its health service answers while it is down (the client asks
    every health_interval when it has several members), the next call
    probes it at once.
  * serving: False while its health service (grpc.health.v1, service
    "stagger.v1.RetryCoordinator") answers NOT_SERVING -- a draining
    replica; the router then prefers each key's next choice. Health errors
    change nothing (unreachability shows in the calls).
  * The channel starts connecting at construction (a health call nobody
    waits for), so the first call does not pay the connection in its 50 ms.
    Not watched with channel.subscribe(): grpc 1.51's poller thread raises
    when the channel is closed under it.
The channel reconnects at least every recheck_interval (its maximum
reconnect backoff), with gRPC's own retries off (the client's deadline and
fallback are the retry policy). Thread-safe.
"""

import math
import threading
from typing import Any, List, Optional, Tuple

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
                 recheck_interval: float, clock: Clock) -> None:
        self.member = member
        # The generated stubs are untyped: Any.
        self.stub: Any = coordinator_pb2_grpc.RetryCoordinatorStub(  # type: ignore[no-untyped-call]
            channel)
        self._health: Any = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
        self._channel = channel
        self._recheck = recheck_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._up = True
        self._next_probe = -math.inf
        self._serving = True
        self._health.Check.future(health_pb2.HealthCheckRequest(service=SERVICE),
                                  timeout=5)  # connect now; the answer is unused

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

    def mark_up(self) -> None:
        with self._lock:
            self._up = True

    def mark_down(self) -> None:
        with self._lock:
            self._up = False
            self._next_probe = self._clock.now() + self._recheck

    def check_health(self, timeout: float) -> None:
        try:
            resp = self._health.Check(
                health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout)
        except grpc.RpcError:
            return
        self._serving = resp.status == health_pb2.HealthCheckResponse.SERVING
        if self._serving:
            with self._lock:  # it answers: if down, probe it now
                if not self._up:
                    self._next_probe = -math.inf

    def close(self) -> None:
        self._channel.close()
