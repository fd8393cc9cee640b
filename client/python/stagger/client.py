"""CoordinatorClient: the Python client of stagger.v1.RetryCoordinator that
delivery workers ask "may I send attempt n now?" (admit) and tell what
happened (report) -- the C++ CoordinatorClient's contract
(client/coordinator_client.h), fail-open:

  * Target: a stagger-agent's socket ("unix:/run/stagger/agent.sock", one
    member), or coordinator replicas in the C++ client's forms ("host:port",
    "a:port,b:port", "name=host:port,...", "dns:///host:port"; members.py).
    Each endpoint key is owned by one replica by rendezvous hashing over
    the members' names (rendezvous.py, as staggerd's --replicas); a call
    goes to its key's owner, or to the key's next choice while the owner
    is down or draining (replica.py). Only when no replica can take it is
    it decided locally.
  * Every call has a deadline: call_deadline (default 50 ms, real time); a
    waiting Admit (wait > 0) gets wait + 1 s.
  * INVALID_ARGUMENT from the coordinator raises InvalidArgument with its
    message; never masked by a fallback decision. Local decisions check the
    request first with the same messages (validation.py).
  * Any other failure -- an RPC error, a timeout, an unusable answer --
    marks that replica down (not called again until recheck_interval has
    passed on `clock`, then probed by one call) and this call is decided by
    the local engine (fallback.py): a Decision with source LOCAL and
    fallback_cause. A coordinator going away never raises.
  * Admission tokens: admit() answers carry Decision.admission (the
    coordinator's token, 1 for a local PROCEED); pass it back as
    report(admission=...) for that attempt.
  * Decision.wait_supported is the answer's own (the replica that answered
    holds waiting Admits); a DONE to anything but a success report is
    passed on as it came (the loop raises ProtocolError).
  * A background thread (only with several members or dns:///) asks each
    replica's health every health_interval and re-resolves a dns:///
    target every dns_refresh. close() stops it and the channels.
Thread-safe: share one client between a process's worker threads.
"""

import dataclasses
import random as random_module
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple

import grpc

from stagger import validation, wire
from stagger.cancel import Canceller
from stagger.clock import REAL_CLOCK, Clock
from stagger.decision import Decision, Outcome
from stagger.errors import Cancelled, InvalidArgument
from stagger.fallback import LocalEngine
from stagger.members import Member, parse_members, resolve_dns_members, sorted_by_name
from stagger.policy import LocalPolicy
from stagger.rendezvous import Rendezvous
from stagger.replica import Replica, make_channel

NOT_CALLED = "coordinator considered down (recheck interval not over); not called"
MemberResolver = Callable[[str, str], Sequence[Member]]


@dataclasses.dataclass(frozen=True)
class _View:
    """The replicas of one membership; replicas[i] is ring.names[i]."""
    ring: Optional[Rendezvous]
    replicas: Tuple[Replica, ...]


def _check_range(name: str, v: float, hi: float) -> None:
    if not (isinstance(v, (int, float)) and 0 < v <= hi):
        raise InvalidArgument("%s: must be in (0, %g] seconds, got %r"
                              % (name, hi, v))


class CoordinatorClient:
    def __init__(self, target: str = "127.0.0.1:50051", *,
                 call_deadline: float = 0.05, recheck_interval: float = 1.0,
                 local_policy: Optional[LocalPolicy] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 tls_server_name: Optional[str] = None,
                 clock: Optional[Clock] = None,
                 random: Optional[Callable[[], float]] = None,
                 dns_refresh: float = 5.0, health_interval: float = 0.25,
                 resolve_members: Optional[MemberResolver] = None) -> None:
        spec = parse_members(target)
        _check_range("call_deadline", call_deadline, 60)
        _check_range("recheck_interval", recheck_interval, 3600)
        _check_range("dns_refresh", dns_refresh, 3600)
        _check_range("health_interval", health_interval, 3600)
        self._policy = local_policy or LocalPolicy()
        self._policy.check()
        self._call_deadline = call_deadline
        self._recheck = recheck_interval
        self._credentials, self._tls_name = credentials, tls_server_name
        self._clock = clock or REAL_CLOCK
        self._local = LocalEngine(self._policy, self._clock,
                                  random or random_module.Random().random)
        self._spec = spec
        self._resolve = resolve_members or resolve_dns_members
        self._lock = threading.Lock()
        members = list(spec.members)
        if spec.dns_host:
            members = self._resolved() or []
        self._view = self._make_view(members, None)
        self._stop = threading.Event()
        self._housekeeper: Optional[threading.Thread] = None
        if len(spec.members) > 1 or spec.dns_host:
            self._housekeeper = threading.Thread(
                target=self._housekeeping, args=(dns_refresh, health_interval),
                name="stagger-client", daemon=True)
            self._housekeeper.start()

    # ---- the calls -------------------------------------------------------

    def admit(self, endpoint: str, attempt: int = 1, *,
              deadline: Optional[float] = None,
              first_attempt_time: Optional[float] = None,
              wait: Optional[float] = None,
              cancel: Optional[Canceller] = None) -> Decision:
        """May attempt `attempt` to `endpoint` be sent now? `wait` (seconds,
        0..60): let the coordinator hold the call that long (waiting
        admission); `cancel` cuts a waiting call short (raises Cancelled)."""
        req = wire.to_admit_request(endpoint, attempt, deadline,
                                    first_attempt_time, wait)
        timeout = self._call_deadline
        if wait is not None and wait > 0:
            timeout = min(wait, validation.MAX_WAIT_NS / 1e9) + 1.0
        decision, cause = self._call(endpoint, lambda r: r.stub.Admit, req,
                                     timeout, cancel)
        if decision is not None:
            return decision
        err = validation.admit_error(req, self._policy.max_key_bytes)
        if err is not None:
            raise InvalidArgument(err)
        return self._local.admit(endpoint, attempt, deadline, cause)

    def report(self, endpoint: str, attempt: int, outcome: Outcome, *,
               admission: int = 0, retry_after: Optional[float] = None,
               deadline: Optional[float] = None,
               first_attempt_time: Optional[float] = None) -> Decision:
        """What happened to attempt `attempt`; for a failure the answer is
        the decision for attempt + 1. `admission`: the Decision.admission of
        the admit() that let this attempt go."""
        req = wire.to_report_request(endpoint, attempt, outcome, retry_after,
                                     admission, deadline, first_attempt_time)
        decision, cause = self._call(
            endpoint, lambda r: r.stub.Report, req, self._call_deadline, None)
        if decision is not None:
            return decision
        err = validation.report_error(req, self._policy.max_key_bytes)
        if err is not None:
            raise InvalidArgument(err)
        return self._local.report(endpoint, attempt, Outcome(outcome),
                                  retry_after, deadline, cause)

    # ---- membership and state -------------------------------------------

    def replicas(self) -> List[Member]:
        return [r.member for r in self._view.replicas]

    def owner_of(self, key: str) -> Optional[Member]:
        """The member that owns `key` by hashing alone (None: no members)."""
        v = self._view
        return None if v.ring is None else v.replicas[v.ring.owner(key)].member

    @property
    def coordinator_up(self) -> bool:
        """Whether calls go to at least one replica now."""
        return any(r.up for r in self._view.replicas)

    def close(self) -> None:
        self._stop.set()
        if self._housekeeper is not None:
            self._housekeeper.join()
        for r in self._view.replicas:
            r.close()

    def __enter__(self) -> "CoordinatorClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals -------------------------------------------------------

    def _route(self, key: str) -> Optional[Replica]:
        """The first usable replica in the key's order, serving ones first."""
        v = self._view
        if len(v.replicas) <= 1 or v.ring is None:
            return v.replicas[0] if v.replicas and v.replicas[0].try_use() else None
        rank = v.ring.rank(key)
        for serving_only in (True, False):
            for i in rank:
                r = v.replicas[i]
                if (r.serving or not serving_only) and r.try_use():
                    return r
        return None

    def _call(self, key: str, method: Callable[[Replica], Any], req: Any,
              timeout: float,
              cancel: Optional[Canceller]) -> Tuple[Optional[Decision], str]:
        """(the coordinator's decision, "") or (None, why not)."""
        r = self._route(key)
        if r is None:
            return None, NOT_CALLED
        try:
            resp = self._rpc(method(r), req, timeout, cancel)
        except grpc.RpcError as e:
            err: Any = e  # a grpc.Call too: code(), details()
            if err.code() is grpc.StatusCode.INVALID_ARGUMENT:
                r.mark_up()
                raise InvalidArgument(err.details()) from None
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled while waiting for admission") from None
            r.mark_down()
            return None, "coordinator %s: %s: %s" % (
                r.name, err.code().name, err.details())
        except (Cancelled, InvalidArgument):
            raise
        except Exception as e:  # a channel closed under us, ...
            r.mark_down()
            return None, "coordinator %s: %s" % (r.name, e)
        d = (wire.from_wire(resp.decision, self._clock.now(), r.name)
             if resp.HasField("decision") else None)
        if d is None:
            r.mark_down()
            return None, "coordinator %s answered no usable decision" % r.name
        r.mark_up()
        return d, ""

    @staticmethod
    def _rpc(rpc: Any, req: Any, timeout: float,
             cancel: Optional[Canceller]) -> Any:
        """The response; `cancel` cuts the call short (Cancelled)."""
        if cancel is None:
            return rpc(req, timeout=timeout, wait_for_ready=False)
        future = rpc.future(req, timeout=timeout, wait_for_ready=False)
        handle = cancel.on_cancel(future.cancel)
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise Cancelled("cancelled while waiting for admission") from None
        finally:
            cancel.remove(handle)

    def _make_view(self, members: Sequence[Member], old: Optional[_View]) -> _View:
        kept = {r.member: r for r in (old.replicas if old else ())}
        replicas = tuple(
            kept.pop(m) if m in kept else
            Replica(m, make_channel(m.target, self._recheck, self._credentials,
                                    self._tls_name), self._recheck, self._clock)
            for m in members)
        for gone in kept.values():
            gone.close()
        ring = Rendezvous([m.name for m in members]) if members else None
        return _View(ring, replicas)

    def _resolved(self) -> Optional[List[Member]]:
        try:
            found = sorted_by_name(self._resolve(self._spec.dns_host,
                                                 self._spec.dns_port))
        except OSError:
            return None
        return found or None

    def _housekeeping(self, dns_refresh: float, health_interval: float) -> None:
        next_dns = time.monotonic() + dns_refresh
        while not self._stop.wait(health_interval):
            for r in self._view.replicas:
                r.check_health(timeout=max(health_interval, 0.1))
            if self._spec.dns_host and time.monotonic() >= next_dns:
                found = self._resolved()
                if found is not None and found != self.replicas():
                    with self._lock:
                        self._view = self._make_view(found, self._view)
                next_dns = time.monotonic() + (dns_refresh if self._view.replicas
                                               else 1.0)
