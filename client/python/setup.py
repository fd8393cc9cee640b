"""Builds the stagger-client wheel (pyproject.toml holds its metadata).

The generated modules are made here, at build time, from the repository's
proto/ (or $STAGGER_PROTO_DIR) with the system protoc and
grpc_python_plugin (Debian 12: protobuf-compiler, protobuf-compiler-grpc),
into gen/ next to this file, and packaged as stagger.v1 and
stagger.grpc_health.v1 -- the same layout client/python/CMakeLists.txt
makes for the build tree. gRPC's health.proto is compiled from a copy
placed at stagger/grpc_health/v1/ so that its module does not hide inside
the installed grpc package; on the wire it is still grpc.health.v1.Health.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.environ.get("STAGGER_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
GEN = os.path.join(HERE, "gen")
PACKAGES = ("stagger/v1", "stagger/grpc_health", "stagger/grpc_health/v1")


def protoc(root, proto):
    plugin = shutil.which("grpc_python_plugin")
    if plugin is None or shutil.which("protoc") is None:
        sys.exit("setup.py: protoc and grpc_python_plugin are needed to build "
                 "the wheel (Debian: protobuf-compiler protobuf-compiler-grpc)")
    subprocess.run(["protoc", "--proto_path=" + root, "--python_out=" + GEN,
                    "--pyi_out=" + GEN, "--grpc_python_out=" + GEN,
                    "--plugin=protoc-gen-grpc_python=" + plugin, proto],
                   check=True)


def generate():
    if not os.path.isfile(os.path.join(PROTO, "stagger", "v1", "coordinator.proto")):
        sys.exit("setup.py: no proto/stagger/v1/coordinator.proto under %s "
                 "(set STAGGER_PROTO_DIR to the repository's proto/)" % PROTO)
    shutil.rmtree(GEN, ignore_errors=True)
    health_root = os.path.join(GEN, "_health_proto")
    health_copy = os.path.join(health_root, "stagger", "grpc_health", "v1")
    os.makedirs(health_copy)
    shutil.copy(os.path.join(PROTO, "grpc", "health", "v1", "health.proto"), health_copy)
    protoc(PROTO, "stagger/v1/coordinator.proto")
    protoc(health_root, "stagger/grpc_health/v1/health.proto")
    shutil.rmtree(health_root)
    for package in PACKAGES:  # regular packages in the wheel
        open(os.path.join(GEN, package, "__init__.py"), "a").close()


generate()
setup(
    packages=["stagger"] + [p.replace("/", ".") for p in PACKAGES],
    package_dir={"stagger": "stagger",
                 **{p.replace("/", "."): "gen/" + p for p in PACKAGES}},
    package_data={"stagger": ["py.typed"], "stagger.v1": ["*.pyi"],
                  "stagger.grpc_health.v1": ["*.pyi"]},
)
