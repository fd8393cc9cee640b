#!/usr/bin/python3
"""The worker snippets of README.md and the client packages' READMEs compile
against the client libraries, and handle every way a delivery ends.

  readme_snippet_test.py --src ROOT --cxx COMPILER [--python PYTHON
                         --python_gen DIR] [--tsc TSC] [--go_workspace DIR]
                         [--cache_dir DIR] [--self_test] DOC...

A snippet is a fenced block (```cpp, ```python, ```ts or ```go) between
the lines
  <!-- BEGIN compiled snippet ... -->   and   <!-- END compiled snippet -->
and each DOC must hold at least one. Each is checked as it stands:
  cpp     its own translation unit (-std=c++17 -c, -Wall -Wextra -Werror)
          with ROOT on the include path: the public headers (client/*.h);
  python  after prelude.py (the worker's own Job, post, park, dead_letter),
          `mypy --strict` with the package and its generated modules, then
          run: one delivery (with no coordinator there, the fallback
          decides);
  ts      after prelude.ts (Job, park, deadLetter declared), `tsc --strict
          --noEmit`, "@stagger/client" resolved to client/node/src;
  go      as package main, beside a main.go, `go vet` in GOPATH mode on
          client/go (client/go/gopath.sh).
And every snippet names each end of a run (ENDS below): a worker that
drops one (the TypeScript snippet once dropped "deferred") fails here.
A language whose tool is not given is not checked; the C++ one always is.

--self_test also checks that the test bites: a DOC without the markers, a
snippet that calls a function its library lacks (one per language
checked), and one that drops an end must each fail.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK_RE = re.compile(
    r"^<!-- BEGIN compiled snippet[^>]*-->\n```(?P<lang>cpp|python|ts|go)\n"
    r"(?P<code>.*?)^```\n<!-- END compiled snippet -->$", re.S | re.M)
CXX_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]
# Each end of a run, as each language names it.
ENDS = {
    "cpp": ["kSucceeded", "kGaveUp", "kDeferred", "kCancelled", "kError"],
    "python": ["SUCCEEDED", "GAVE_UP", "DEFERRED", "CANCELLED", "StaggerError"],
    "ts": ['"succeeded"', '"gave_up"', '"deferred"', '"cancelled"', '"error"'],
    "go": ["EndSucceeded", "EndGaveUp", "EndDeferred", "EndCancelled", "EndError"],
}
# A call each language's snippets make, and a name no library has.
PLANTED = {
    "cpp": ("OutcomeFromHttpStatus(", "OutcomeFromStatus("),
    "python": ("endpoint_key_from_url(", "endpoint_key_from_uri("),
    "ts": ("endpointKeyFromUrl(", "endpointKeyFromUri("),
    "go": ("EndpointKeyFromURL(", "EndpointKeyFromURI("),
}


def snippets(text):
    """[(lang, code)] of the marked blocks."""
    return [(m.group("lang"), m.group("code")) for m in BLOCK_RE.finditer(text)]


def run(argv, **kw):
    """The tool's complaints (empty: it passed)."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600, **kw)
    return "" if r.returncode == 0 else (r.stdout or "exit %d" % r.returncode)


def check_cpp(code, args, tmp):
    source = os.path.join(tmp, "snippet.cc")
    with open(source, "w", encoding="utf-8") as fh:
        fh.write(code)
    return run([args.cxx] + CXX_FLAGS + ["-I", args.src, "-c", source, "-o",
                                         os.path.join(tmp, "snippet.o")])


def check_python(code, args, tmp):
    with open(os.path.join(HERE, "snippets", "prelude.py"), encoding="utf-8") as fh:
        prelude = fh.read()
    module = os.path.join(tmp, "snippet.py")
    with open(module, "w", encoding="utf-8") as fh:
        fh.write(prelude + "\n" + code + "\n" + "if __name__ == '__main__':\n"
                 "    deliver(Job('https://hooks.example.com/x', b'{}'))\n")
    path = os.pathsep.join([os.path.join(args.src, "client", "python"), args.python_gen])
    env = dict(os.environ, MYPYPATH=path, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1")
    out = run([args.python, "-m", "mypy", "--config-file",
               os.path.join(args.src, "client", "python", "mypy.ini"),
               "--cache-dir", args.cache_dir or os.path.join(tmp, "mypy"), module],
              env=env, cwd=tmp)
    return out or run([args.python, module], env=env, cwd=tmp)


def check_ts(code, args, tmp):
    with open(os.path.join(HERE, "snippets", "prelude.ts"), encoding="utf-8") as fh:
        prelude = fh.read()
    with open(os.path.join(tmp, "snippet.ts"), "w", encoding="utf-8") as fh:
        fh.write(code + "\n" + prelude)
    node = os.path.join(args.src, "client", "node")
    os.symlink(os.path.join(node, "node_modules"), os.path.join(tmp, "node_modules"))
    with open(os.path.join(tmp, "tsconfig.json"), "w", encoding="utf-8") as fh:
        fh.write('{"extends": "%s", "compilerOptions": {"noEmit": true, "rootDir": "/",'
                 ' "baseUrl": ".", "paths": {"@stagger/client": ["%s"]}},'
                 ' "include": ["snippet.ts"]}' % (os.path.join(node, "tsconfig.json"),
                                                  os.path.join(node, "src", "index.ts")))
    return run([args.tsc, "-p", os.path.join(tmp, "tsconfig.json")], cwd=tmp)


def check_go(code, args, tmp):
    pkg = os.path.join(tmp, "gosnippet")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "snippet.go"), "w", encoding="utf-8") as fh:
        fh.write(code)
    with open(os.path.join(pkg, "main.go"), "w", encoding="utf-8") as fh:
        fh.write("package main\n\nfunc main() {}\n")
    name = "stagger.dev/snippet-%d" % os.getpid()
    try:
        return run([os.path.join(args.src, "client", "go", "gopath.sh"),
                    args.go_workspace, "--link", "%s=%s" % (name, pkg), "--",
                    "go", "vet", name])
    finally:
        link = os.path.join(args.go_workspace, "src", name)
        if os.path.islink(link):
            os.remove(link)


CHECKS = {"cpp": check_cpp, "python": check_python, "ts": check_ts, "go": check_go}


def checked(lang, args):
    return {"cpp": True, "python": bool(args.python), "ts": bool(args.tsc),
            "go": bool(args.go_workspace)}[lang]


def check_snippet(where, lang, code, args, compile_it=True):
    """Errors with one snippet (empty: it handles every end, compiles)."""
    errors = []
    missing = [e for e in ENDS[lang] if e not in code]
    if missing:
        errors.append("%s does not handle every end of a run: no %s"
                      % (where, ", ".join(missing)))
    if not compile_it or not checked(lang, args):
        return errors
    tmp = tempfile.mkdtemp(prefix="stagger-snippet-")
    try:
        out = CHECKS[lang](code, args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out:
        errors.append("%s does not compile:\n%s" % (where, out))
    return errors


def check(doc, text, args):
    """Errors (empty: every snippet of `doc` compiles and handles every end)."""
    found = snippets(text)
    if not found:
        return ["%s has no ```cpp/python/ts/go block between <!-- BEGIN "
                "compiled snippet --> and <!-- END compiled snippet -->" % doc]
    return [e for i, (lang, code) in enumerate(found)
            for e in check_snippet("%s, snippet %d (%s)" % (doc, i + 1, lang),
                                   lang, code, args)]


def self_test(docs, args):
    """Failures to catch planted mistakes (empty: the test bites)."""
    failures = []
    doc, text = docs[0]
    if not check(doc, text.replace("<!-- BEGIN compiled snippet", "<!-- snippet"), args):
        failures.append("self-test: a doc without the snippet's markers was not caught")
    planted = set()
    for doc, text in docs:
        for lang, code in snippets(text):
            if lang in planted or not checked(lang, args):
                continue
            planted.add(lang)
            call, wrong = PLANTED[lang]
            if call not in code:
                failures.append("self-test: %s's %s snippet no longer calls %s; "
                                "plant another mistake" % (doc, lang, call))
                continue
            if not check_snippet(doc, lang, code.replace(call, wrong), args):
                failures.append("self-test: a %s snippet calling a function its "
                                "library lacks was not caught" % lang)
            end = ENDS[lang][2]
            if not check_snippet(doc, lang, code.replace(end, "DROPPED"), args,
                                 compile_it=False):
                failures.append("self-test: a %s snippet that drops %s was not caught"
                                % (lang, end))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="the repository's root")
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--python")
    ap.add_argument("--python_gen", help="the generated modules' folder")
    ap.add_argument("--tsc")
    ap.add_argument("--go_workspace")
    ap.add_argument("--cache_dir", help="mypy's cache, kept between runs")
    ap.add_argument("--self_test", action="store_true")
    ap.add_argument("docs", nargs="+")
    args = ap.parse_args()
    docs = []
    for doc in args.docs:
        with open(os.path.join(args.src, doc), encoding="utf-8") as fh:
            docs.append((doc, fh.read()))
    errors = [e for doc, text in docs for e in check(doc, text, args)]
    if args.self_test and not errors:
        errors = self_test(docs, args)
    for e in errors:
        print("FAIL: " + e)
    if not errors:
        print("OK: %d snippets in %d docs" % (sum(len(snippets(t)) for _, t in docs), len(docs)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
