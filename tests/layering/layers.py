"""The layers of Stagger and what each may include: the one place that says
it, and the check that holds the code to it (docs/ARCHITECTURE.md,
"Layers").

Every C++ file under the source folders is read for its `#include` lines;
each include is classified (a standard or system header, Abseil, protobuf,
gRPC, prometheus-cpp, generated proto code, or a project folder) and held
to its folder's rule below. Then the folder graph (folder A -> folder B if
a file of A includes a file of B) must have no cycle: no folder includes a
folder that includes it back.

check(root, overlay) returns the violations as readable lines (empty: the
house holds). `overlay` maps a relative path to a file's text and stands in
for the file on disk (the self-test plants violations that way).
"""

import os
import re

SOURCE_FOLDERS = ("core", "server", "client", "agent", "bench")
CXX = (".h", ".cc")

# What an include is, by its path.
def kind_of(path, angle):
    if angle:
        return "std"
    if re.match(r"(stagger/v1/|grpc/health/v1/).*\.pb\.h$", path):
        return "proto"
    for prefix, kind in (("absl/", "absl"), ("google/protobuf/", "protobuf"),
                         ("grpcpp/", "grpc"), ("grpc/", "grpc"),
                         ("prometheus/", "prometheus"), ("gtest/", "test"),
                         ("gmock/", "test"), ("benchmark/", "test")):
        if path.startswith(prefix):
            return kind
    return "project:" + os.path.dirname(path)


LIBS = {"std", "absl", "protobuf", "grpc", "prometheus", "proto"}

# Folder -> (allowed library kinds, allowed project folders). The first
# rule whose folder is the file's folder or one above it applies (most
# specific first). An allowed folder admits itself and what lies under it;
# written with a trailing "/." it admits itself only.
RULES = [
    # The decision logic: Abseil and the standard library only.
    ("core/engine", {"std", "absl"}, ["core/engine"]),
    # The rest of core: below server, client and the agent.
    ("core/wire", LIBS, ["core/engine", "core/lease", "core/wire"]),
    ("core/config", LIBS, ["core/engine", "core/wire", "core/config"]),
    ("core/metrics", LIBS, ["core/engine", "core/metrics"]),
    ("core/lease", {"std", "absl"}, ["core/engine", "core/lease"]),
    ("core", LIBS, ["core"]),
    # staggerd: core and itself, never the client or the agent.
    ("server", LIBS, ["core", "server"]),
    # The client's implementation and its tools.
    ("client/internal", LIBS, ["core", "client"]),
    ("client/staggerctl", LIBS, ["core", "client"]),
    ("client/examples", LIBS, ["core", "client"]),
    # The client's public headers: what a worker includes.
    ("client", {"std", "absl"}, ["core/engine", "client/."]),
    ("agent", LIBS, ["core", "client", "agent"]),
    ("bench", LIBS | {"test"}, ["core", "server", "client", "agent", "bench"]),
]
# Public client headers may name only these core headers (value types).
CLIENT_PUBLIC_CORE = {"core/engine/clock.h", "core/engine/decision.h",
                      "core/engine/engine_config.h", "core/engine/random.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def admits(allowed, folder):
    if allowed.endswith("/."):
        return folder == allowed[:-2]
    return folder == allowed or folder.startswith(allowed + "/")


def rule_for(folder):
    for name, libs, folders in RULES:
        if folder == name or folder.startswith(name + "/"):
            return name, libs, folders
    return None


def source_files(root, overlay):
    files = {}
    for top in SOURCE_FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(CXX):
                    rel = os.path.relpath(os.path.join(dirpath, n), root)
                    files[rel] = None
    for rel in overlay:
        files[rel] = overlay[rel]
    out = {}
    for rel, text in files.items():
        if text is None:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        out[rel] = text
    return out


def check_file(rel, text):
    folder = os.path.dirname(rel)
    rule = rule_for(folder)
    if rule is None:
        return [], set()
    name, libs, folders = rule
    problems, targets = [], set()
    for m in INCLUDE.finditer(text):
        path = m.group(2)
        kind = kind_of(path, m.group(1) == "<")
        if kind.startswith("project:"):
            target = kind[len("project:"):]
            targets.add(target)
            ok = any(admits(f, target) for f in folders)
            if ok and name == "client" and rel.endswith(".h") and \
                    target.startswith("core/"):
                ok = path in CLIENT_PUBLIC_CORE
            if not ok:
                problems.append("%s: includes \"%s\": %s may include only %s"
                                % (rel, path, name, ", ".join(folders)))
        elif kind not in libs:
            problems.append("%s: includes %s (%s): %s may use only %s"
                            % (rel, path, kind, name,
                               ", ".join(sorted(libs))))
    return problems, targets


def find_cycle(edges):
    """A folder cycle as a list of folders, or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def check(root, overlay=None):
    files = source_files(root, overlay or {})
    problems = []
    edges = {}
    for rel in sorted(files):
        p, targets = check_file(rel, files[rel])
        problems += p
        folder = os.path.dirname(rel)
        for t in targets:
            if t != folder:
                edges.setdefault(folder, set()).add(t)
    cycle = find_cycle(edges)
    if cycle:
        problems.append("folders include each other: " + " -> ".join(cycle))
    return problems
