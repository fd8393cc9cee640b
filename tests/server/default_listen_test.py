#!/usr/bin/python3
"""server.default_listen: staggerd and stagger-agent started without an
address flag listen on loopback only, and their first line says so.

  default_listen_test.py --staggerd BIN --agent BIN

  1. staggerd with no --address and no --metrics_address: its first line is
     "serving gRPC on 127.0.0.1:50051 (loopback only), plaintext, no
     authorization policy; metrics on 127.0.0.1:9464 (loopback only, ...";
     every TCP socket it listens on (read from /proc: its file descriptors
     against /proc/net/tcp and tcp6) is bound to a loopback address, the
     ports 50051 and 9464 among them; it answers on 127.0.0.1:50051; and
     every non-loopback address of this machine (/proc/net/fib_trie,
     /proc/net/if_inet6) refuses a connection on those ports.
  2. stagger-agent with no --metrics_address (its --listen a Unix socket
     here): the same for its first line and its metrics port 9465.
  3. The check proves it can fail: staggerd and the agent started with
     0.0.0.0 addresses are reported as listening beyond loopback, naming
     the socket.

The default ports must be free: the test waits up to a minute for them,
then fails naming the port (ctest runs it alone on them: RESOURCE_LOCK).
"""

import argparse
import errno
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

WAIT_S = 60
LOOPBACK_V4 = "127."
LOOPBACK_V6 = "::1"


class Process:
    """A child whose stderr lines are collected as they come."""

    def __init__(self, args):
        self.args = args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            if self.proc.poll() is not None:
                self.reader.join(5)
                return any(text in line for line in self.lines)
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)

    def output(self):
        return "\n".join(self.lines)


def socket_inodes(pid):
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def decode(hex_address, v6):
    """(address, port) of /proc/net/tcp's "ADDR:PORT" (little-endian words)."""
    addr, port = hex_address.split(":")
    raw = bytes.fromhex(addr)
    # Each 32-bit word is in host (little-endian) order.
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET6 if v6 else socket.AF_INET
    return socket.inet_ntop(family, raw), int(port, 16)


def listening_sockets(pid):
    """[(address, port)] of the TCP sockets `pid` listens on."""
    mine = socket_inodes(pid)
    out = []
    for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        if not os.path.exists(name):
            continue
        with open(name) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in mine:  # LISTEN
                    out.append(decode(fields[1], v6))
    return out


def is_loopback(address):
    return address.startswith(LOOPBACK_V4) or address == LOOPBACK_V6 or \
        address.startswith("::ffff:127.")


def beyond_loopback(pid):
    """Problems: each socket `pid` listens on beyond loopback."""
    return ["listens on %s port %d, beyond loopback" % (a, p)
            for a, p in listening_sockets(pid) if not is_loopback(a)]


def machine_addresses():
    """This machine's non-loopback addresses (link-local v6 left out: a
    connection to one needs its interface)."""
    found = set()
    try:
        with open("/proc/net/fib_trie") as f:
            last = None
            for line in f:
                s = line.strip()
                if s.startswith("|--"):
                    last = s[3:].strip()
                elif s == "/32 host LOCAL" and last:
                    found.add(last)
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                raw = line.split()[0]
                addr = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(raw))
                if not addr.startswith("fe80"):
                    found.add(addr)
    except OSError:
        pass
    return sorted(a for a in found if not is_loopback(a))


def reachable(address, port):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        try:
            s.connect((address, port))
            return True
        except OSError:
            return False


def port_free(port):
    for family, host in ((socket.AF_INET, "127.0.0.1"),
                         (socket.AF_INET, "0.0.0.0")):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return False
                raise
    return True


def wait_for_free(ports):
    deadline = time.monotonic() + WAIT_S
    while True:
        taken = [p for p in ports if not port_free(p)]
        if not taken:
            return []
        if time.monotonic() > deadline:
            return ["port %d is taken by another process: this test starts "
                    "the programs on their default ports" % p for p in taken]
        time.sleep(1)


def check_default(name, args, first_line, ports, ready):
    """Problems of one program started on its default addresses."""
    problems = wait_for_free(ports)
    if problems:
        return problems
    p = Process(args)
    try:
        if not p.wait_for(ready):
            return ["%s did not get to \"%s\"; it printed:\n%s"
                    % (name, ready, p.output())]
        if not p.lines or not p.lines[0].startswith(first_line):
            problems.append("%s's first line is not \"%s...\": %r"
                            % (name, first_line,
                               p.lines[0] if p.lines else None))
        problems += ["%s %s" % (name, e) for e in beyond_loopback(p.proc.pid)]
        bound = {port for _, port in listening_sockets(p.proc.pid)}
        for port in ports:
            if port not in bound:
                problems.append("%s does not listen on its default port %d "
                                "(it listens on %s)" % (name, port,
                                                        sorted(bound)))
            elif not reachable("127.0.0.1", port):
                problems.append("%s does not answer on 127.0.0.1:%d"
                                % (name, port))
            for address in machine_addresses():
                if reachable(address, port):
                    problems.append("%s is reachable on %s port %d"
                                    % (name, address, port))
        print("%s: first line %r; listening on %s; not reachable on %s"
              % (name, p.lines[0] if p.lines else None,
                 sorted(listening_sockets(p.proc.pid)),
                 machine_addresses() or "(no other address here)"))
    finally:
        p.stop()
    return problems


def check_caught(name, args, ready):
    """The check must report a program listening on 0.0.0.0."""
    p = Process(args)
    try:
        if not p.wait_for(ready):
            return ["self-test: %s on 0.0.0.0 did not start:\n%s"
                    % (name, p.output())]
        found = beyond_loopback(p.proc.pid)
        if not any("0.0.0.0" in e for e in found):
            return ["self-test: %s listening on 0.0.0.0 was not caught (%s)"
                    % (name, found)]
    finally:
        p.stop()
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staggerd", required=True)
    ap.add_argument("--agent", required=True)
    args = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        agent = [args.agent, "--listen=unix:%s/agent.sock" % tmp,
                 "--coordinator=127.0.0.1:1"]
        problems += check_caught(
            "staggerd", [args.staggerd, "--address=0.0.0.0:0",
                         "--metrics_address=0.0.0.0:0"], "listening on")
        problems += check_caught(
            "stagger-agent", [args.agent, "--listen=unix:%s/a2.sock" % tmp,
                              "--coordinator=127.0.0.1:1",
                              "--metrics_address=0.0.0.0:0"],
            "listening on")
        problems += check_default(
            "staggerd", [args.staggerd],
            "staggerd: serving gRPC on 127.0.0.1:50051 (loopback only), "
            "plaintext, no authorization policy; metrics on 127.0.0.1:9464 "
            "(loopback only, plain HTTP)", [50051, 9464], "listening on")
        problems += check_default(
            "stagger-agent", agent,
            "stagger-agent: serving workers on unix:%s/agent.sock (this host "
            "only, a Unix socket), plaintext, no authorization; metrics on "
            "127.0.0.1:9465 (loopback only, plain HTTP)" % tmp, [9465],
            "listening on")
    for problem in problems:
        print("FAIL: " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
