"""layering: the house's layers hold (tests/layering/layers.py states them).

  1. Every source file includes only what its layer may (direct includes:
     C++ includes, and the imports of client/python, client/node and
     client/go), no
     folder includes a folder that includes it back, and no source file
     lies outside every layer.
  2. The client's public headers (client/*.h) pull in, transitively, no
     gRPC, prometheus-cpp, protobuf or generated code, and each compiles on
     its own: asked of the compiler (-M -MG), since every library lives in
     /usr/include and a narrowed include path cannot tell them apart.
  3. The check proves itself: planted violations of each kind must be
     caught, naming the file, and a planted include that is allowed must
     not be.

  layering_test.py SOURCE_DIR CXX
"""

import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402

FORBIDDEN_IN_PUBLIC = re.compile(
    r"(^|/)(grpcpp|grpc|prometheus|google/protobuf|stagger/v1)/"
    r"|client/internal/|core/engine/engine\.h")

PLANTED = [
    # (path, text, what the report must say)
    ("core/engine/planted.h", '#include "grpcpp/grpcpp.h"\n',
     "core/engine/planted.h: includes grpcpp/grpcpp.h (grpc)"),
    ("core/wire/planted.cc",
     '#include "server/service/coordinator_service.h"\n',
     'core/wire/planted.cc: includes "server/service/coordinator_service.h"'),
    ("client/planted.h", '#include "stagger/v1/coordinator.pb.h"\n',
     "client/planted.h: includes stagger/v1/coordinator.pb.h (proto)"),
    ("client/planted_internal.h", '#include "client/internal/replica.h"\n',
     'client/planted_internal.h: includes "client/internal/replica.h"'),
    ("client/planted_engine.h", '#include "core/engine/engine.h"\n',
     'client/planted_engine.h: includes "core/engine/engine.h"'),
    ("server/service/planted.cc", '#include "client/coordinator_client.h"\n',
     'server/service/planted.cc: includes "client/coordinator_client.h"'),
    ("agent/planted.cc", '#include "server/daemon/drain.h"\n',
     'agent/planted.cc: includes "server/daemon/drain.h"'),
    ("agent/planted_internal.cc",
     '#include "client/internal/sync_session.h"\n',
     'agent/planted_internal.cc: includes "client/internal/sync_session.h"'),
    ("client/python/stagger/planted.py", "import os, requests\n",
     "client/python/stagger/planted.py: includes requests"),
    ("client/node/src/planted.ts", 'import axios from "axios";\n',
     "client/node/src/planted.ts: includes axios"),
    ("client/go/planted.go",
     'package stagger\n\nimport (\n\t"fmt"\n\tredis "github.com/go-redis/redis"\n)\n',
     "client/go/planted.go: includes github.com/go-redis/redis"),
    ("client/node/src/planted_up.ts",
     'import { x } from "../../../server/x";\n',
     "client/node/src/planted_up.ts: includes ../../../server/x"),
    ("core/planted_room/a.h", "#include <map>\n",
     "core/planted_room/a.h: in no layer"),
]
CYCLE = {
    "server/alpha/a.h": '#include "server/beta/b.h"\n',
    "server/beta/b.h": '#include "server/alpha/a.h"\n',
}
ALLOWED = {
    "core/engine/planted_ok.h": '#include "absl/time/time.h"\n#include <map>\n',
    "client/planted_ok.h": '#include "core/engine/decision.h"\n',
    "client/python/stagger/planted_ok.py":
        "import json\nimport grpc\nfrom stagger.v1 import coordinator_pb2\n"
        "from . import clock\n",
    "client/node/src/planted_ok.ts":
        'import * as grpc from "@grpc/grpc-js";\n'
        'import { A } from "./gen/stagger/v1/coordinator";\n'
        'import { B } from "./clock";\n',
}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def transitive_includes(cxx, src, header):
    out = subprocess.run(
        [cxx, "-std=c++17", "-x", "c++", "-M", "-MG", "-I", src,
         os.path.join(src, header)],
        check=True, capture_output=True, text=True).stdout
    return [p for p in out.replace("\\\n", " ").split()
            if not p.endswith(":")]


def self_test(src, cxx):
    for path, text, expect in PLANTED:
        found = layers.check(src, {path: text})
        if not any(expect in p for p in found):
            fail("planted %s was not caught; the check said: %s"
                 % (path, found))
    found = layers.check(src, CYCLE)
    if not any("folders include each other" in p and "server/alpha" in p
               for p in found):
        fail("a planted folder cycle was not caught: %s" % found)
    found = layers.check(src, ALLOWED)
    if found:
        fail("allowed includes were refused: %s" % found)
    # The transitive scan finds gRPC behind an internal header.
    deps = transitive_includes(cxx, src, "client/internal/replica.h")
    if not any(FORBIDDEN_IN_PUBLIC.search(d) for d in deps):
        fail("the transitive scan found nothing forbidden behind "
             "client/internal/replica.h, which includes gRPC: it is broken")
    print("self-test: %d planted violations and a cycle caught, "
          "allowed includes passed" % len(PLANTED))


def main():
    src, cxx = sys.argv[1], sys.argv[2]
    self_test(src, cxx)
    problems = layers.check(src)
    public = sorted(os.path.relpath(p, src)
                    for p in glob.glob(os.path.join(src, "client", "*.h")))
    for h in public:
        bad = [d for d in transitive_includes(cxx, src, h)
               if FORBIDDEN_IN_PUBLIC.search(d)]
        if bad:
            problems.append("%s pulls in: %s" % (h, ", ".join(bad)))
        r = subprocess.run([cxx, "-std=c++17", "-x", "c++", "-fsyntax-only",
                            "-I", src, "-"],
                           input='#include "%s"\n' % h, text=True,
                           capture_output=True)
        if r.returncode != 0:
            problems.append("%s does not compile on its own:\n%s"
                            % (h, r.stderr))
    if problems:
        for p in problems:
            print("FAIL: " + p)
        sys.exit(1)
    print("OK: every layer includes only what it may; public client "
          "headers (%s) hold" % ", ".join(public))


if __name__ == "__main__":
    main()
