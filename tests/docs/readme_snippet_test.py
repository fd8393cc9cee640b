#!/usr/bin/python3
"""README.md's C++ worker snippet compiles against the client library.

  readme_snippet_test.py --readme README.md --cxx COMPILER --src ROOT
                         [--self_test]

The snippet is the one ```cpp block between the lines
  <!-- BEGIN compiled snippet ... -->   and   <!-- END compiled snippet -->
It is compiled as it stands, as its own translation unit (-std=c++17 -c,
-Wall -Wextra -Werror), with ROOT on the include path: the client's public
headers (client/*.h) and the core value types they name; Abseil comes from
the system, as for every target. A README whose snippet is missing, or
does not compile, fails here with the compiler's message. The snippet
declares what it leaves to the worker (its HTTP client, its queue), so it
compiles without being linked.

--self_test also checks that the test bites: a README without the markers,
and a snippet that calls a function the client library does not have, must
both fail.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

BLOCK_RE = re.compile(
    r"^<!-- BEGIN compiled snippet[^>]*-->\n```cpp\n(?P<code>.*?)^```\n"
    r"<!-- END compiled snippet -->$", re.S | re.M)
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]


def snippet(readme_text):
    """The snippet's code, or None without exactly one marked block."""
    blocks = BLOCK_RE.findall(readme_text)
    return blocks[0] if len(blocks) == 1 else None


def compile_errors(code, cxx, src):
    """The compiler's complaints about `code` (empty: it compiled)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "readme_snippet.cc")
        with open(source, "w", encoding="utf-8") as fh:
            fh.write(code)
        r = subprocess.run([cxx] + FLAGS + ["-I", src, "-c", source, "-o",
                                            os.path.join(tmp, "snippet.o")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        return "" if r.returncode == 0 else (r.stdout or "exit %d" % r.returncode)


def check(readme_text, cxx, src):
    """Errors (empty: the README's snippet compiles)."""
    code = snippet(readme_text)
    if code is None:
        return ["README.md has no single ```cpp block between <!-- BEGIN "
                "compiled snippet --> and <!-- END compiled snippet -->"]
    out = compile_errors(code, cxx, src)
    return ["README.md's snippet does not compile:\n" + out] if out else []


def self_test(readme_text, cxx, src):
    """Failures to catch a planted mistake (empty: the test bites)."""
    code = snippet(readme_text)
    called = "OutcomeFromHttpStatus("
    cases = [
        ("a README without the snippet's markers",
         readme_text.replace("<!-- BEGIN compiled snippet", "<!-- snippet")),
        ("a snippet calling a function the library lacks",
         readme_text.replace(code, code.replace(called, "OutcomeFromStatus("))),
    ]
    failures = []
    if called not in code:
        failures.append("self-test: the snippet no longer calls %s; plant "
                        "another mistake" % called)
    for what, planted in cases:
        if not check(planted, cxx, src):
            failures.append("self-test: %s was not caught" % what)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--src", required=True, help="the repository's root")
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    with open(args.readme, encoding="utf-8") as fh:
        text = fh.read()
    errors = check(text, args.cxx, args.src)
    if args.self_test and not errors:
        errors = self_test(text, args.cxx, args.src)
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
