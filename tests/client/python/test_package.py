"""client.python.package: the `stagger` package installs as a user installs
it. An offline build (pip wheel --no-build-isolation --no-index, the
pyproject.toml and setup.py of client/python, from a copy outside the
repository) makes a wheel that holds the generated modules, py.typed and
the Apache-2.0 license field; it installs into a fresh virtual environment
(--system-site-packages, for Debian's grpcio and protobuf) in a temporary
folder; and a worker there (package_worker.py), with no PYTHONPATH,
imports stagger from that environment and delivers three POSTs through a
real staggerd to a receiver on loopback."""

import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile

import pytest

from staggerd_harness import Staggerd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
PYTHON = "/usr/bin/python3"


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600, **kw)
    assert r.returncode == 0, "%s:\n%s" % (" ".join(argv), r.stdout)
    return r.stdout


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="stagger-wheel-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(work):
    src = os.path.join(work, "src")
    shutil.copytree(os.path.join(ROOT, "client", "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "gen", "build",
                                                  "dist", "*.egg-info"))
    env = dict(os.environ, STAGGER_PROTO_DIR=os.path.join(ROOT, "proto"),
               PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)
    run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", os.path.join(work, "dist"), src], env=env)
    [name] = os.listdir(os.path.join(work, "dist"))
    return os.path.join(work, "dist", name)


def test_the_wheel_holds_the_generated_modules(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta[0]).decode()
    for module in ("stagger/loop.py", "stagger/py.typed",
                   "stagger/v1/coordinator_pb2.py",
                   "stagger/v1/coordinator_pb2_grpc.py",
                   "stagger/v1/coordinator_pb2.pyi",
                   "stagger/grpc_health/v1/health_pb2.py",
                   "stagger/grpc_health/v1/health_pb2_grpc.py"):
        assert module in names, module
    assert "License: Apache-2.0" in metadata
    assert "Requires-Dist: grpcio" in metadata


class Receiver(http.server.BaseHTTPRequestHandler):
    posts = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Receiver.posts += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_worker_runs_from_the_installed_wheel(work, wheel):
    venv = os.path.join(work, "venv")
    run([PYTHON, "-m", "venv", "--system-site-packages", venv])
    python = os.path.join(venv, "bin", "python")
    run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel])
    worker = os.path.join(work, "worker.py")
    shutil.copy(os.path.join(HERE, "package_worker.py"), worker)
    receiver = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    sd = Staggerd(os.environ["STAGGERD"])
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = run([python, worker, "--target", sd.target, "--url",
                   "http://127.0.0.1:%d/hooks" % receiver.server_port],
                  cwd=work, env=env)
    finally:
        sd.stop()
        receiver.shutdown()
    print(out)
    assert "stagger from " + os.path.join(venv, "lib") in out
    assert out.count("end SUCCEEDED 1") == 3
    assert Receiver.posts == 3
