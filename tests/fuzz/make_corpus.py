#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets, tests/fuzz/corpus/.

Run from anywhere: python3 tests/fuzz/make_corpus.py (needs protoc). Seeds
are starting points for libFuzzer and the inputs of the corpus replay tests
(fuzz.<target>.corpus); the input formats are described at the top of each
tests/fuzz/<target>_fuzz.cc. Inputs that found a bug are kept next to the
generated ones under a name saying so (crash-*, never overwritten here).
"""
import os
import struct
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
NOW = 1767225600  # the FakeClock's start, 2026-01-01T00:00:00Z


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def encode(message, text, proto="stagger/v1/coordinator.proto"):
    return subprocess.run(
        ["protoc", "-I", os.path.join(ROOT, "proto"), "-I", "/usr/include",
         "--encode=stagger.v1." + message, proto],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def config_loader():
    sources = {
        "tests/core/config/testdata": None,
        "tests/e2e/testdata": None,
        "deploy/k8s/base": "config.textproto",
        "deploy/k8s/overlays/example": "config.textproto",
    }
    for folder, only in sources.items():
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if only and name != only:
                continue
            if not (name.endswith(".json") or name.endswith(".textproto")):
                continue
            with open(os.path.join(ROOT, folder, name), "rb") as f:
                text = f.read()
            tag = b"1" if name.endswith(".json") else b"0"  # low bit: JSON
            write("config_loader", folder.replace("/", "_") + "_" + name, tag + text)
    write("config_loader", "empty_textproto", b"0")
    write("config_loader", "empty_json_object", b"1{}")


def record(op, advance_10ms, payload):
    return struct.pack("<BHH", op, advance_10ms, len(payload)) + payload


def ts(seconds):
    return "{ seconds: %d }" % (NOW + seconds)


def service():
    admit = lambda ep, attempt, extra="": encode(
        "AdmitRequest", 'endpoint: "%s" attempt: %d %s' % (ep, attempt, extra))
    report = lambda ep, attempt, outcome, extra="": encode(
        "ReportRequest", 'endpoint: "%s" attempt: %d outcome: %s %s'
        % (ep, attempt, outcome, extra))
    fail5 = b"".join(record(1, 10, report("a", n, "RETRYABLE_FAILURE"))
                     for n in range(1, 6))
    write("service", "admit_report", record(0, 0, admit("a", 1))
          + record(1, 5, report("a", 1, "RETRYABLE_FAILURE"))
          + record(0, 20, admit("a", 2)) + record(1, 1, report("a", 2, "SUCCESS")))
    write("service", "breaker_opens", fail5 + record(0, 1, admit("a", 6))
          + record(4, 0, encode("GetEndpointRequest", 'endpoint: "a"')))
    write("service", "retry_after", record(
        1, 0, report("b/1", 1, "RATE_LIMITED",
                     "retry_after { seconds: 120 } deadline " + ts(60)))
          + record(0, 100, admit("b/1", 2, "deadline " + ts(60))))
    write("service", "deadline_last_chance", record(
        1, 0, report("a", 3, "TIMEOUT", "deadline " + ts(2)
                     + " first_attempt_time " + ts(-10))))
    batch_items = "".join('items { endpoint: "e%d" attempt: 1 }' % i for i in range(6))
    write("service", "batch_fills_table",
          record(2, 0, encode("AdmitBatchRequest", batch_items))
          + record(5, 0, encode("ListEndpointsRequest", "page_size: 2"))
          + record(6, 300, b"") + record(5, 0, b""))
    write("service", "report_batch", record(3, 0, encode(
        "ReportBatchRequest",
        'items { endpoint: "a" attempt: 1 outcome: RETRYABLE_FAILURE } '
        'items { endpoint: "b" attempt: 2 outcome: PERMANENT_FAILURE } '
        'items { endpoint: "a" attempt: 2 outcome: RATE_LIMITED '
        'retry_after { seconds: 5 } }')))
    write("service", "bad_inputs", record(0, 0, admit("", 1))
          + record(1, 0, report("a", 0, "SUCCESS"))
          + record(1, 0, encode("ReportRequest", 'endpoint: "a" attempt: 1'))
          + record(5, 0, encode("ListEndpointsRequest", 'page_token: "zz"'))
          + record(0, 0, admit("a", 1, "deadline { seconds: -99999999999 }")))


def engine_ops():
    # op, key pick, attempt (8 bytes), ... as engine_ops_fuzz.cc reads them.
    def admit(key, attempt, deadline=0):
        return struct.pack("<BBQhh", 0, key, attempt, deadline, 0)

    def report(key, attempt, outcome, ra=0, deadline=0):
        return struct.pack("<BBQQHhh", 2, key, attempt, outcome - 1, ra,
                           deadline, 0)

    advance = lambda ms, seconds: struct.pack("<BHB", 4, ms, 0 if seconds else 1)
    fails = b"".join(report(0, n, 2) for n in range(1, 8))
    write("engine_ops", "fail_until_open", admit(0, 1) + fails + admit(0, 8)
          + advance(2, True) + admit(0, 8) + report(0, 8, 1) + bytes([7, 0]))
    write("engine_ops", "retry_after_deadline", admit(2, 1, 50)
          + report(2, 1, 4, ra=600, deadline=50) + advance(500, False)
          + admit(2, 2, 50) + bytes([7, 2]))
    write("engine_ops", "reload_and_evict",
          b"".join(admit(k, 1) for k in range(10)) + bytes([5]) + bytes(range(1, 120))
          + advance(200, True) + bytes([6]) + admit(11, 1) + bytes([7, 11]))


def retry_after():
    def raw(header, now=NOW):
        return struct.pack("<BQi", 0, now, 503) + header
    for name, header in [
            ("delta", b"120"), ("delta_spaces", b" \t 7 "), ("huge", b"999999999999"),
            ("negative", b"-5"), ("imf", b"Sun, 06 Nov 1994 08:49:37 GMT"),
            ("rfc850", b"Sunday, 06-Nov-94 08:49:37 GMT"),
            ("asctime", b"Sun Nov  6 08:49:37 1994"),
            ("future_imf", b"Thu, 01 Jan 2026 00:02:00 GMT"),
            ("bad_zone", b"Sun, 06 Nov 1994 08:49:37 PST"),
            ("fraction", b"1.5"), ("word", b"soon"), ("empty", b"")]:
        write("retry_after", name, raw(header))
    for mode in (1, 2, 3):
        write("retry_after", "generated_%d" % mode,
              struct.pack("<BQiQ", mode, NOW, 200, NOW + 90 * mode))


def sync():
    up = lambda text: encode("SyncUp", text, "stagger/v1/sync.proto")
    down = lambda text: encode("SyncDown", text, "stagger/v1/sync.proto")
    hello = ('hello { agent_id: "a" incarnation: 1 protocol: 2 '
             'members: "stagger-0" next_count_seq: 1 } number: 1 ')
    counts = lambda seq, ep: (
        'counts { seq: %d endpoints { endpoint: "%s" buckets { start %s '
        'first_attempts: 40 successes: 39 last_success %s } } } '
        % (seq, ep, ts(0), ts(0)))
    # Open, count, count again (re-sent), fail twice, push, renew.
    write("sync", "open_count_fail_push",
          record(0, 210, up(hello))
          + record(0, 10, up('number: 2 acked_incarnation: 7 acked_version: 2 '
                             + counts(1, "a")))
          + record(0, 10, up('number: 3 ' + counts(1, "a")))
          + record(2, 1, b"a") + record(2, 1, b"a")
          + record(4, 1, b"")
          + record(0, 50, up('number: 4 acked_incarnation: 7 acked_version: 3')))
    write("sync", "gap_and_protocol_1",
          record(1, 0, up('hello { agent_id: "b" incarnation: 2 }'))
          + record(0, 0, up(hello))
          + record(0, 0, up(counts(5, "x"))))
    write("sync", "down_snapshot_delta", record(3, 0, down(
        'renewed: 1 ttl { seconds: 2 } version: 3 replica_time %s '
        'snapshot { incarnation: 7 version: 3 entries { target { target: "e" '
        'scope: SCOPE_ENDPOINT } why: NOT_CLEAR_BREAKER } policies { '
        'default_initial_jitter { nanos: 100000000 } overrides { prefix: "p" '
        'initial_jitter { seconds: 1 } } } }' % ts(0))) + record(3, 5, down(
        'delta { incarnation: 7 from_version: 3 to_version: 4 removed { '
        'target: "e" scope: SCOPE_ENDPOINT } }')))
    write("sync", "bad_counts", record(0, 0, up(hello + 'counts { seq: 0 }'))
          + record(1, 0, up('counts { seq: 3 endpoints { endpoint: "" } }')))


def status_query():
    # [mode] raw query; mode 0: filter/page_size/page_token, 1: key.
    seeds = {
        "endpoints_default": (0, b""),
        "endpoints_page": (0, b"filter=all&page_size=20&page_token=6b2f31"),
        "endpoints_bad_size": (0, b"page_size=5000"),
        "endpoints_repeated": (0, b"page_size=1&page_size=2"),
        "endpoints_unknown": (0, b"bogus=1&&filter=not_clear"),
        "key_html": (1, b"key=orders%2F%3Cb%3Eopen%3C%2Fb%3E+%26+%22q%22"),
        "key_utf8": (1, b"key=%C3%A9%E2%82%AC%F0%9F%98%80"),
        "key_bad_escape": (1, b"key=%zz%4"),
        "key_overlong": (1, b"key=%C0%AF"),
        "key_control": (1, b"key=a%00b%0A"),
        "key_no_equals": (1, b"key"),
        "key_raw_high": (1, b"key=\xff\xfe"),
    }
    for name, (mode, raw) in seeds.items():
        write("status_query", name, bytes([mode]) + raw)


if __name__ == "__main__":
    config_loader()
    service()
    engine_ops()
    retry_after()
    sync()
    status_query()
