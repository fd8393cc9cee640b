"""A real rate limiter for the end-to-end tests: Debian's nginx on loopback,
started and stopped by the test, with `limit_req` in front of a second
server block that answers 200.

  front  127.0.0.1:<port>: while the file <work>/down exists, every request
         is answered 503 (the endpoint is down: `if (-f ...) { return 503; }`
         runs in nginx's rewrite phase, before limit_req counts anything);
         otherwise `limit_req zone=hooks burst=<burst> nodelay` with
         `limit_req_status 429` (one bucket of <rate>r/s for the endpoint,
         keyed by the server's name), then proxy_pass to the back.
         (A `return` in the same location would run before limit_req: hence
         the proxy.) It logs every request: "$msec $status $request_body".
  back   127.0.0.1:<port>: answers 200 "ok".

Nginx.down(True/False) makes the outage and the recovery; Nginx.log()
reads the access log: (unix seconds, status, body) per request, in order.
It keeps its files in a temporary folder of its own (Nginx.work, left for
a person to read after a failure, like the other tests' temporary files).

Needs /usr/sbin/nginx (scripts/setup installs the `nginx` package). The
process runs in the foreground as a child of the test and dies with it.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from typing import List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "agent"))
from agent_harness import _die_with_parent, free_port, poll_until  # noqa: E402

NGINX = "/usr/sbin/nginx"

CONFIG = """\
worker_processes 1;
pid {work}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  client_body_temp_path {work}/body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  access_log off;
  client_body_buffer_size 16k;
  limit_req_zone $server_name zone=hooks:1m rate={rate}r/s;
  limit_req_status 429;
  log_format deliveries escape=json '$msec $status "$request_body"';
  server {{
    listen 127.0.0.1:{front};
    server_name hooks;
    access_log {work}/access.log deliveries;
    if (-f {work}/down) {{ return 503; }}
    location / {{
      limit_req zone=hooks burst={burst} nodelay;
      proxy_pass http://127.0.0.1:{back};
    }}
  }}
  server {{
    listen 127.0.0.1:{back};
    access_log off;
    location / {{ return 200 "ok\\n"; }}
  }}
}}
"""

Request = Tuple[float, int, str]  # arrival (Unix s), status, body


class Nginx:
    """nginx with a limiter of `rate`/s and `burst`, down from the start if
    `down`. Use as a context manager, or call stop()."""

    def __init__(self, rate: int, burst: int, down: bool = True):
        if not os.access(NGINX, os.X_OK):
            raise RuntimeError("%s not found: run scripts/setup (it installs "
                               "Debian's nginx)" % NGINX)
        # Its own folder, which its workers (nobody, when started as root)
        # can reach: they look for the down file.
        self.work = tempfile.mkdtemp(prefix="stagger-nginx-")
        os.chmod(self.work, 0o755)
        self.port = free_port()
        back = free_port()
        self.url = "http://127.0.0.1:%d/hooks" % self.port
        self.down(down)
        conf = os.path.join(self.work, "nginx.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG.format(work=self.work, rate=rate, burst=burst,
                                  front=self.port, back=back))
        self._err = open(os.path.join(self.work, "error.log"), "w",
                         encoding="utf-8")
        self.p = subprocess.Popen(
            [NGINX, "-p", self.work, "-c", conf, "-e", "stderr",
             "-g", "daemon off;"],
            stderr=self._err, preexec_fn=_die_with_parent)
        try:
            poll_until("nginx on port %d" % self.port, self._answers)
        except AssertionError:
            self.stop()
            raise AssertionError("nginx did not start:\n" + self.errors())

    def _answers(self) -> bool:
        if self.p.poll() is not None:
            raise AssertionError("nginx exited %s:\n%s" % (self.p.returncode,
                                                          self.errors()))
        return os.path.exists(os.path.join(self.work, "access.log")) and \
            _connects(self.port)

    def down(self, down: bool) -> None:
        """The endpoint answers 503 to everything (down) or is up."""
        flag = os.path.join(self.work, "down")
        if down:
            open(flag, "w").close()
        elif os.path.exists(flag):
            os.remove(flag)

    def log(self) -> List[Request]:
        """Every request nginx answered on the front, in order."""
        out: List[Request] = []
        with open(os.path.join(self.work, "access.log"),
                  encoding="utf-8") as f:
            for line in f:
                msec, status, body = line.rstrip("\n").split(" ", 2)
                out.append((float(msec), int(status), json.loads(body)))
        return out

    def errors(self) -> str:
        self._err.flush()
        with open(os.path.join(self.work, "error.log"),
                  encoding="utf-8") as f:
            return f.read()

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGQUIT)  # graceful: logs flushed
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=30)
        self._err.close()

    def __enter__(self) -> "Nginx":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _connects(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
