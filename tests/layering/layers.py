"""The layers of Stagger and what each may include: the one place that says
it, and the check that holds the code to it. docs/ARCHITECTURE.md's layer
table says the same in words; tests/layering/architecture_doc_test.py holds
the two to each other.

Every C++ file under the source folders is read for its `#include` lines,
every Python file of client/python (but the wheel's build script) for its
imports, every TypeScript file of client/node/src and every Go file of
client/go (but its generated stubs, client/go/v1) for theirs. Each include is classified (the
language's standard library, Abseil, protobuf, gRPC, prometheus-cpp,
generated code, a test library, or a project folder or file) and held to
its folder's rule below. Then the folder graph (folder A -> folder B if a
file of A includes a file of B) must have no cycle: no folder includes a
folder that includes it back. A source file under no rule is a violation
too: a new folder gets its rule (and its row in the table).

check(root, overlay) returns the violations as readable lines (empty: the
house holds). `overlay` maps a relative path to a file's text and stands in
for the file on disk (the self-test plants violations that way).
"""

import ast
import os
import re
import sys

SOURCE_FOLDERS = ("core", "server", "client", "staggerctl", "agent", "bench",
                  "examples")
CXX = (".h", ".cc")
# client/node's own sources (not its generated code, packages or output).
NODE_SRC = "client/node/src"
NODE_SKIPPED = ("client/node/src/gen/",)
# client/python's own sources: not the wheel's build script (setup.py, which
# runs setuptools and protoc) nor what an in-place wheel build leaves.
PYTHON_SKIPPED = ("client/python/setup.py", "client/python/gen/",
                  "client/python/build/")
# client/go's own sources (its stubs are generated: stagger.dev/stagger/v1).
GO_SRC = "client/go"
GO_MODULE = "stagger.dev/stagger"
GO_SKIPPED = ("client/go/v1/",)
SKIPPED_DIRS = {"node_modules", "dist", "__pycache__"}

# Library kinds, as the layer table of docs/ARCHITECTURE.md names them.
# Every layer may use its language's standard library ("std"); the table
# says so once instead of on every row.
KIND_NAMES = {
    "absl": "Abseil",
    "protobuf": "protobuf",
    "grpc": "gRPC",
    "prometheus": "prometheus-cpp",
    "proto": "generated code",
    "test": "test libraries",
}
LIBS = {"std", "absl", "protobuf", "grpc", "prometheus", "proto"}

# Folder -> (allowed library kinds, allowed project entries). The first
# rule whose folder is the file's folder or one above it applies (most
# specific first). A file may always include files of its own folder. An
# allowed entry "x" admits folder x and what lies under it; "x/." admits
# folder x only; "x/name.h" admits that one file.
RULES = [
    ("proto", {"std", "protobuf", "grpc"}, []),
    # core: what staggerd, the client and the agent share.
    ("core/engine", {"std", "absl"}, []),
    ("core/lease", {"std", "absl"}, ["core/engine"]),
    ("core/wire", {"std", "absl", "protobuf", "proto"},
     ["core/engine", "core/lease"]),
    ("core/config", {"std", "absl", "protobuf", "proto"},
     ["core/engine", "core/wire"]),
    ("core/metrics", {"std", "absl", "prometheus"}, ["core/engine"]),
    ("core/http", {"std", "absl", "protobuf"}, ["core/engine"]),
    ("core/status", {"std", "absl"}, ["core/engine", "core/http"]),
    ("core/rpc", {"std", "absl", "protobuf", "grpc"}, []),
    ("core/cli", {"std", "absl"}, []),
    # staggerd: core and itself, never the client or the agent.
    ("server/config", {"std", "absl"}, ["core"]),
    ("server/metrics", {"std", "absl", "prometheus"}, ["core"]),
    ("server/state", {"std", "absl", "protobuf", "proto"},
     ["core", "server/metrics"]),
    ("server/security", {"std", "absl", "protobuf", "grpc", "prometheus"},
     ["core"]),
    ("server/service", {"std", "absl", "protobuf", "grpc", "proto"},
     ["core", "server/metrics", "server/security"]),
    ("server/status", {"std", "absl", "grpc", "proto"},
     ["core", "server/service"]),
    ("server/daemon", LIBS,
     ["core", "server/config", "server/metrics", "server/state",
      "server/security", "server/service", "server/status"]),
    ("server", {"std", "absl"},
     ["core", "server/daemon", "server/security", "server/service"]),
    # The client: its implementation below its public headers, its tools
    # and its packages for other languages.
    ("client/internal", LIBS, ["core", "client/."]),
    ("client/python", {"std", "protobuf", "grpc", "proto"}, []),
    ("client/node", {"std", "protobuf", "grpc", "proto"}, []),
    ("client/go", {"std", "protobuf", "grpc", "proto"}, []),
    # The public headers: what a worker includes. Of core, only these
    # value types, and the lease protocol's time constants (the default
    # flush interval).
    ("client", {"std", "absl"},
     ["core/engine/clock.h", "core/engine/decision.h",
      "core/engine/engine_config.h", "core/engine/random.h",
      "core/lease/time_bounds.h"]),
    # staggerctl: the operator's Admin tool, beside the worker library. It
    # uses the client's public headers (TLS options, the watch), never its
    # implementation.
    ("staggerctl", {"std", "absl", "protobuf", "grpc", "proto"},
     ["core", "client/."]),
    # The agent: a program built on the client's public headers.
    ("agent/status", {"std", "absl"}, ["core", "client/."]),
    ("agent", {"std", "absl", "protobuf", "grpc", "proto"},
     ["core", "client/.", "agent/status"]),
    # The example workers users copy from: the client's public headers.
    ("examples", {"std", "absl", "grpc", "proto"},
     ["client/.", "core/cli"]),
    ("bench", LIBS | {"test"}, ["core", "server", "client", "agent", "bench"]),
]

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
TS_IMPORT = re.compile(r"""(?:^\s*(?:import|export)\b[^'"]*?\bfrom\s*|"""
                       r"""^\s*import\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]""",
                       re.M)


def kind_of(path, angle):
    """What a C++ include is: a library kind, or "project:<path>"."""
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
    return "project:" + path


def python_kind(module):
    """What a Python import of client/python is (its package is
    `stagger`; `stagger.v1` and `stagger.grpc_health` are generated)."""
    top = module.split(".")[0]
    if module.startswith(".") or module == "stagger" or \
            module.startswith("stagger."):
        if re.match(r"stagger\.(v1|grpc_health)(\.|$)", module):
            return "proto"
        return "own"
    if top == "grpc":
        return "grpc"
    if module == "google.protobuf" or module.startswith("google.protobuf."):
        return "protobuf"
    if top in sys.stdlib_module_names or top == "__future__":
        return "std"
    return "library:" + module


def node_kind(rel, spec):
    """What a TypeScript import of client/node/src is."""
    if spec.startswith("node:"):
        return "std"
    if spec.startswith("."):
        target = os.path.normpath(os.path.join(os.path.dirname(rel), spec))
        if (target + "/").startswith(NODE_SKIPPED[0]):
            return "proto"
        return "own" if target.startswith(NODE_SRC + "/") else \
            "outside:" + target
    if spec == "@grpc/grpc-js":
        return "grpc"
    if spec == "@bufbuild/protobuf" or spec.startswith("@bufbuild/protobuf/"):
        return "protobuf"
    return "library:" + spec


GO_IMPORT_BLOCK = re.compile(r"^import\s*\((.*?)^\)", re.M | re.S)
GO_IMPORT_LINE = re.compile(r'^import\s+(?:[\w.]+\s+)?"([^"]+)"', re.M)
GO_SPEC = re.compile(r'^\s*(?:[\w.]+\s+)?"([^"]+)"', re.M)


def go_imports(text):
    """The import paths of a Go file."""
    paths = GO_IMPORT_LINE.findall(text)
    for block in GO_IMPORT_BLOCK.findall(text):
        paths += GO_SPEC.findall(block)
    return paths


def go_kind(path):
    """What a Go import of client/go is (its module is stagger.dev/stagger;
    stagger.dev/stagger/v1 is generated)."""
    if path == GO_MODULE + "/v1" or path.startswith(GO_MODULE + "/v1/"):
        return "proto"
    if path == GO_MODULE or path.startswith(GO_MODULE + "/"):
        return "own"
    if path == "google.golang.org/grpc" or path.startswith("google.golang.org/grpc/"):
        return "grpc"
    if path.startswith("google.golang.org/protobuf/"):
        return "protobuf"
    if "." not in path.split("/")[0]:
        return "std"
    return "library:" + path


def admits(allowed, target, target_is_file):
    """Whether the allowed entry admits an include of `target` (a file's
    path if target_is_file, else a folder)."""
    folder = os.path.dirname(target) if target_is_file else target
    if allowed.endswith((".h", ".cc")):
        return target_is_file and target == allowed
    if allowed.endswith("/."):
        return folder == allowed[:-2]
    return folder == allowed or folder.startswith(allowed + "/")


def rule_for(folder):
    for name, libs, entries in RULES:
        if folder == name or folder.startswith(name + "/"):
            return name, libs, entries
    return None


def is_source(rel):
    if rel.endswith(CXX) and rel.split("/")[0] in SOURCE_FOLDERS:
        return True
    if rel.startswith("client/python/") and rel.endswith(".py"):
        return not rel.startswith(PYTHON_SKIPPED)
    if rel.startswith(GO_SRC + "/") and rel.endswith(".go"):
        return not rel.startswith(GO_SKIPPED)
    return rel.startswith(NODE_SRC + "/") and rel.endswith(".ts") and \
        not rel.startswith(NODE_SKIPPED)


def source_files(root, overlay):
    files = {}
    for top in SOURCE_FOLDERS:
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), root)
                if is_source(rel):
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


def python_imports(text):
    """The modules a Python file imports (relative ones start with ".")."""
    modules = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            modules += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules.append("." * node.level + (node.module or ""))
    return modules


def includes_of(rel, text):
    """[(what the file names, kind, target path or None)]: a target is a
    project file (C++) whose folder takes part in the folder graph."""
    out = []
    if rel.endswith(CXX):
        for m in INCLUDE.finditer(text):
            kind = kind_of(m.group(2), m.group(1) == "<")
            if kind.startswith("project:"):
                out.append((m.group(2), "project", kind[len("project:"):]))
            else:
                out.append((m.group(2), kind, None))
    elif rel.endswith(".py"):
        for module in python_imports(text):
            out.append((module, python_kind(module), None))
    elif rel.endswith(".go"):
        for path in go_imports(text):
            out.append((path, go_kind(path), None))
    else:
        for m in TS_IMPORT.finditer(text):
            out.append((m.group(1), node_kind(rel, m.group(1)), None))
    return out


def check_file(rel, text):
    """(violations, folders it includes) of one source file."""
    folder = os.path.dirname(rel)
    rule = rule_for(folder)
    if rule is None:
        return (["%s: in no layer: give its folder a rule in "
                 "tests/layering/layers.py and a row in docs/ARCHITECTURE.md"
                 % rel], set())
    name, libs, entries = rule
    problems, targets = [], set()
    for what, kind, target in includes_of(rel, text):
        if kind == "own":
            continue
        if kind == "project":
            targets.add(os.path.dirname(target))
            if os.path.dirname(target) == folder or \
                    any(admits(e, target, True) for e in entries):
                continue
            problems.append("%s: includes \"%s\": %s may include only %s"
                            % (rel, what, name,
                               ", ".join(entries) or "its own folder"))
        elif kind not in libs:
            problems.append("%s: includes %s (%s): %s may use only %s"
                            % (rel, what, kind, name,
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
