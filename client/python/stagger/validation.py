"""Request validation with staggerd's exact INVALID_ARGUMENT messages, in
staggerd's order, for the local fallback (so bad input is the same error
with or without the coordinator). tests/vectors/client_vectors.json
(validation) holds it to the C++ code.

Order, as the server's: first the wire checks (core/wire/wire.cc
FromProto: ReportRequest.outcome set and known, retry_after and wait
well-formed Durations, deadline and first_attempt_time well-formed
Timestamps), then the engine's (core/engine: endpoint key, attempt,
retry_after range, and the waiting-admission check of `wait`).
  endpoint    "endpoint: must not be empty" | "endpoint: N bytes, over the
              limit of M (limits.max_key_bytes)" | "endpoint: control
              character 0xNN at byte I" | "endpoint: not valid UTF-8 at
              byte I"  (sizes and offsets in UTF-8 bytes)
  attempt     "attempt: must be in [1, 1000000], got N"
  outcome     "outcome: must be set" | "outcome: unknown value N"
  retry_after "retry_after: must be >= 0, got D" | "... must be <= 24h, got D"
  wait        "wait: must be >= 0, got D" | "wait: must be <= 1m, got D"
D is absl::FormatDuration's text (durations.format_duration).
admit_error / report_error return the message, or None if the request is
valid. Pure.
"""

from typing import Optional

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from stagger.durations import NANOS_PER_SECOND, format_duration
from stagger.proto import coordinator_pb2 as pb

MAX_ATTEMPT = 1_000_000                     # engine.cc kMaxAttemptNumber
MAX_RETRY_AFTER_NS = 86400 * NANOS_PER_SECOND  # engine::kMaxRetryAfter
MAX_WAIT_NS = 60 * NANOS_PER_SECOND            # AdmitRequest.wait <= 60s
_MAX_DURATION_SECONDS = 315576000000           # google.protobuf.Duration
_MIN_TIMESTAMP, _MAX_TIMESTAMP = -62135596800, 253402300799  # 0001..9999


def invalid_utf8_at(data: bytes) -> Optional[int]:
    """Offset of the first byte not part of well-formed UTF-8, or None."""
    i = 0
    while i < len(data):
        c = data[i]
        if c < 0x80:
            i += 1
            continue
        if c & 0xE0 == 0xC0:
            n, cp = 2, c & 0x1F
        elif c & 0xF0 == 0xE0:
            n, cp = 3, c & 0x0F
        elif c & 0xF8 == 0xF0:
            n, cp = 4, c & 0x07
        else:
            return i
        if i + n > len(data):
            return i
        for k in range(1, n):
            if data[i + k] & 0xC0 != 0x80:
                return i
            cp = (cp << 6) | (data[i + k] & 0x3F)
        if (cp < (0, 0, 0x80, 0x800, 0x10000)[n] or cp > 0x10FFFF or
                0xD800 <= cp <= 0xDFFF):
            return i
        i += n
    return None


def endpoint_error(key: bytes, max_key_bytes: int) -> Optional[str]:
    """engine::ValidateEndpointKey's message for `key` (UTF-8 bytes)."""
    if not key:
        return "endpoint: must not be empty"
    if len(key) > max_key_bytes:
        return ("endpoint: %d bytes, over the limit of %d "
                "(limits.max_key_bytes)" % (len(key), max_key_bytes))
    for i, c in enumerate(key):
        if c < 0x20 or c == 0x7F:
            return "endpoint: control character 0x%02x at byte %d" % (c, i)
    bad = invalid_utf8_at(key)
    if bad is not None:
        return "endpoint: not valid UTF-8 at byte %d" % bad
    return None


def attempt_error(attempt: int) -> Optional[str]:
    if 1 <= attempt <= MAX_ATTEMPT:
        return None
    return "attempt: must be in [1, %d], got %d" % (MAX_ATTEMPT, attempt)


def _duration_error(d: Duration, field: str) -> Optional[str]:
    """wire::FromProto(Duration)'s check."""
    s, n = d.seconds, d.nanos
    in_range = (-_MAX_DURATION_SECONDS <= s <= _MAX_DURATION_SECONDS and
                -NANOS_PER_SECOND < n < NANOS_PER_SECOND)
    same_sign = not (s > 0 and n < 0) and not (s < 0 and n > 0)
    if in_range and same_sign:
        return None
    return "%s: not a valid Duration (seconds=%d, nanos=%d)" % (field, s, n)


def _timestamp_error(msg: Message, field: str) -> Optional[str]:
    if not msg.HasField(field):
        return None
    t = getattr(msg, field)
    if _MIN_TIMESTAMP <= t.seconds <= _MAX_TIMESTAMP and 0 <= t.nanos <= 999999999:
        return None
    return "%s: not a valid Timestamp (seconds=%d, nanos=%d)" % (
        field, t.seconds, t.nanos)


def _nanos(d: Duration) -> int:
    return int(d.seconds) * NANOS_PER_SECOND + int(d.nanos)


def _range_error(field: str, ns: int, max_ns: int, max_text: str) -> Optional[str]:
    if ns < 0:
        return "%s: must be >= 0, got %s" % (field, format_duration(ns))
    if ns > max_ns:
        return "%s: must be <= %s, got %s" % (field, max_text,
                                              format_duration(ns))
    return None


def admit_error(req: pb.AdmitRequest, max_key_bytes: int = 512) -> Optional[str]:
    """staggerd's message for `req`, or None if it is valid."""
    for err in (_timestamp_error(req, "deadline"),
                _timestamp_error(req, "first_attempt_time"),
                _duration_error(req.wait, "wait") if req.HasField("wait") else None,
                endpoint_error(req.endpoint.encode("utf-8"), max_key_bytes),
                attempt_error(req.attempt),
                _range_error("wait", _nanos(req.wait), MAX_WAIT_NS, "1m")
                if req.HasField("wait") else None):
        if err is not None:
            return err
    return None


def report_error(req: pb.ReportRequest, max_key_bytes: int = 512) -> Optional[str]:
    """staggerd's message for `req`, or None if it is valid."""
    if req.outcome == pb.OUTCOME_UNSPECIFIED:
        return "outcome: must be set"
    if req.outcome not in pb.Outcome.values():
        return "outcome: unknown value %d" % req.outcome
    for err in (_duration_error(req.retry_after, "retry_after")
                if req.HasField("retry_after") else None,
                _timestamp_error(req, "deadline"),
                _timestamp_error(req, "first_attempt_time"),
                endpoint_error(req.endpoint.encode("utf-8"), max_key_bytes),
                attempt_error(req.attempt),
                _range_error("retry_after", _nanos(req.retry_after),
                             MAX_RETRY_AFTER_NS, "24h")
                if req.HasField("retry_after") else None):
        if err is not None:
            return err
    return None
