"""A webhook receiver for the HTTP end-to-end run: a real HTTP/1.1 server
(the standard library's http.server, one thread per request) on loopback,
answering by a script of phases by time since its start, and recording
every request.

  /usr/bin/python3 receiver.py --script script.json [--address 127.0.0.1:0]
  -> stderr: "listening on 127.0.0.1:PORT"; SIGTERM/SIGINT end it.

Requests: POST to any path, a JSON body {"id": <delivery id>, "attempt":
<n>, "worker": <who sent it>} (a body without a string "id" is answered
400 and recorded as malformed). GET /record answers the record as JSON
(below). Every response says "Connection: close".

The script (JSON; Script.parse names the field of any mistake):
  {"before_start": 200,
   "hold": ["py-0", "ts-0", ...],   optional: first requests held back
   "hold_timeout": 180,             seconds, default 180
   "phases": [{"at": 0, "status": 503, "retry_after": 3},
              {"at": 7, "status": 429},
              {"at": 13, "status": 200, "delay": 0.25}]}
  * Until the start, requests are answered `before_start`.
  * The start: at once without "hold"; with it, when every id in "hold"
    has arrived. Requests for those ids are held (not answered) until the
    start, and then all answered by the phase at 0, whenever their threads
    run: a burst that reaches the endpoint together and is answered
    together. After hold_timeout the script starts anyway and the record
    says hold_timed_out, with the ids that never came.
  * From the start, each request is answered by the last phase whose "at"
    (seconds) has passed; "retry_after" adds "Retry-After: <seconds>";
    "delay" (seconds, default 0) is how long it takes to answer (an
    endpoint's latency: the coordinator times its round trip).

Accounting: a 200 acknowledges the delivery. acks[id] counts them; an id
acknowledged a second time is listed in "duplicates" (it is still answered
200: a receiver that already has the delivery says so).

The record: {"started_at": unix s or null, "hold_timed_out": bool,
"missing_from_hold": [ids], "requests": [{"arrived", "answered" (unix s),
"id", "attempt", "worker", "status", "retry_after" (s or null), "held"}],
"acks": {id: n}, "duplicates": [ids], "malformed": [texts]}, requests in
order of answer.
"""

import argparse
import dataclasses
import http.server
import json
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

MAX_BODY_BYTES = 64 * 1024
DEFAULT_HOLD_TIMEOUT = 180.0


class ScriptError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Phase:
    at: float                    # seconds since the start
    status: int
    retry_after: Optional[int]   # seconds, sent as Retry-After
    delay: float = 0.0           # seconds before the answer


@dataclasses.dataclass(frozen=True)
class Script:
    before_start: int
    hold: frozenset
    hold_timeout: float
    phases: tuple

    @staticmethod
    def parse(doc: Any) -> "Script":
        """A script from its JSON document; ScriptError names the field."""
        if not isinstance(doc, dict):
            raise ScriptError("script: expected a JSON object")
        unknown = set(doc) - {"before_start", "hold", "hold_timeout", "phases"}
        if unknown:
            raise ScriptError("script: unknown field(s) %s" % sorted(unknown))
        before = _status(doc.get("before_start", 200), "before_start")
        hold = doc.get("hold", [])
        if not (isinstance(hold, list) and
                all(isinstance(i, str) and i for i in hold)):
            raise ScriptError("hold: expected a list of non-empty strings")
        if len(set(hold)) != len(hold):
            raise ScriptError("hold: ids repeat")
        timeout = doc.get("hold_timeout", DEFAULT_HOLD_TIMEOUT)
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ScriptError("hold_timeout: expected seconds > 0, got %r"
                              % (timeout,))
        phases = doc.get("phases")
        if not (isinstance(phases, list) and phases):
            raise ScriptError("phases: expected a non-empty list")
        parsed: List[Phase] = []
        for i, p in enumerate(phases):
            where = "phases[%d]" % i
            if not isinstance(p, dict) or set(p) - {"at", "status",
                                                     "retry_after", "delay"}:
                raise ScriptError("%s: expected {at, status, [retry_after], "
                                  "[delay]}" % where)
            at = p.get("at")
            if not (isinstance(at, (int, float)) and at >= 0):
                raise ScriptError("%s.at: expected seconds >= 0, got %r"
                                  % (where, at))
            if parsed and at <= parsed[-1].at:
                raise ScriptError("%s.at: must be after phases[%d].at"
                                  % (where, i - 1))
            if not parsed and at != 0:
                raise ScriptError("phases[0].at: must be 0")
            ra = p.get("retry_after")
            if ra is not None and not (isinstance(ra, int) and
                                       not isinstance(ra, bool) and ra >= 0):
                raise ScriptError("%s.retry_after: expected whole seconds "
                                  ">= 0, got %r" % (where, ra))
            delay = p.get("delay", 0)
            if not (isinstance(delay, (int, float)) and
                    not isinstance(delay, bool) and 0 <= delay <= 60):
                raise ScriptError("%s.delay: expected seconds in [0, 60], "
                                  "got %r" % (where, delay))
            parsed.append(Phase(float(at), _status(p.get("status"),
                                                   where + ".status"), ra,
                                float(delay)))
        return Script(before, frozenset(hold), float(timeout), tuple(parsed))

    def phase_at(self, since_start: float) -> Phase:
        """The phase in force `since_start` seconds after the start."""
        current = self.phases[0]
        for p in self.phases:
            if p.at <= since_start:
                current = p
        return current


def _status(v: Any, where: str) -> int:
    if not (isinstance(v, int) and not isinstance(v, bool) and
            100 <= v <= 599):
        raise ScriptError("%s: expected an HTTP status 100..599, got %r"
                          % (where, v))
    return v


class Receiver:
    """The script's state and the record; thread-safe. `clock` gives Unix
    seconds (the record's times, comparable with the workers' logs);
    `sleep` waits out a phase's delay."""

    def __init__(self, script: Script, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.script = script
        self._clock = clock
        self._sleep = sleep
        self._cv = threading.Condition()
        self._started_at: Optional[float] = None
        self._waiting = set(script.hold)
        self._hold_timed_out = False
        self._requests: List[Dict[str, Any]] = []
        self._acks: Dict[str, int] = {}
        self._duplicates: List[str] = []
        self._malformed: List[str] = []
        if not self._waiting:
            self._started_at = clock()

    def start_after_timeout(self) -> None:
        """Starts the script if the hold has not been met by hold_timeout
        (run on a thread of its own)."""
        with self._cv:
            self._cv.wait_for(lambda: self._started_at is not None,
                              self.script.hold_timeout)
            if self._started_at is None:
                self._hold_timed_out = True
                self._start()

    def _start(self) -> None:
        self._started_at = self._clock()
        self._cv.notify_all()

    def answer(self, body: bytes) -> Phase:
        """Decides the answer to one request (blocking while it is held),
        waits out the phase's delay and records it."""
        arrived = self._clock()
        try:
            doc = json.loads(body)
            delivery = doc["id"]
            if not isinstance(delivery, str) or not delivery:
                raise ValueError("id")
        except (ValueError, KeyError, TypeError):
            with self._cv:
                self._malformed.append(body[:200].decode("utf-8", "replace"))
            return Phase(0, 400, None)
        held, phase = self._decide(delivery)
        if phase.delay > 0:
            self._sleep(phase.delay)
        with self._cv:
            self._requests.append({
                "arrived": arrived, "answered": self._clock(),
                "id": delivery, "attempt": doc.get("attempt"),
                "worker": doc.get("worker"), "status": phase.status,
                "retry_after": phase.retry_after, "held": held})
        return phase

    def _decide(self, delivery: str) -> Tuple[bool, Phase]:
        """(held, the phase that answers) for a request of `delivery`; a
        200 is counted as its acknowledgement."""
        with self._cv:
            held = self._started_at is None and delivery in self._waiting
            if held:
                self._waiting.discard(delivery)
                if not self._waiting:
                    self._start()
                self._cv.wait_for(lambda: self._started_at is not None)
                phase = self.script.phase_at(0)
            elif self._started_at is None:
                phase = Phase(0, self.script.before_start, None)
            else:
                phase = self.script.phase_at(self._clock() - self._started_at)
            if phase.status == 200:
                n = self._acks.get(delivery, 0) + 1
                self._acks[delivery] = n
                if n == 2:
                    self._duplicates.append(delivery)
        return held, phase

    def record(self) -> Dict[str, Any]:
        with self._cv:
            return {"started_at": self._started_at,
                    "hold_timed_out": self._hold_timed_out,
                    "missing_from_hold": sorted(self._waiting),
                    "requests": list(self._requests),
                    "acks": dict(self._acks),
                    "duplicates": list(self._duplicates),
                    "malformed": list(self._malformed)}


def make_handler(receiver: Receiver):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            try:
                n = int(self.headers.get("Content-Length", ""))
            except ValueError:
                n = -1
            if not 0 <= n <= MAX_BODY_BYTES:
                self._send(411, b"a Content-Length of 0..%d bytes is "
                                b"required\n" % MAX_BODY_BYTES)
                return
            phase = receiver.answer(self.rfile.read(n))
            extra = ({} if phase.retry_after is None
                     else {"Retry-After": str(phase.retry_after)})
            self._send(phase.status, b"", extra)

        def do_GET(self) -> None:
            if self.path != "/record":
                self._send(404, b"GET /record only\n")
                return
            self._send(200, json.dumps(receiver.record()).encode(),
                       {"Content-Type": "application/json"})

        def _send(self, status: int, body: bytes,
                  headers: Optional[Dict[str, str]] = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass  # the record is the log

    return Handler


class Server(http.server.ThreadingHTTPServer):
    """A thread per request; a listen backlog for a burst of deliveries."""
    daemon_threads = True
    request_queue_size = 128


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", required=True, help="the script (JSON file)")
    ap.add_argument("--address", default="127.0.0.1:0", help="host:port")
    args = ap.parse_args(argv)
    try:
        with open(args.script, encoding="utf-8") as f:
            script = Script.parse(json.load(f))
    except (OSError, ValueError) as e:
        print("receiver: %s: %s" % (args.script, e), file=sys.stderr)
        return 2
    host, _, port = args.address.rpartition(":")
    receiver = Receiver(script)
    server = Server((host, int(port)), make_handler(receiver))
    threading.Thread(target=receiver.start_after_timeout, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
        target=server.shutdown, daemon=True).start())
    print("listening on %s:%d" % server.server_address[:2], file=sys.stderr,
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
