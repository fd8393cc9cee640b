#!/usr/bin/python3
"""Every repository path the documents name exists.

  paths_test.py --root ROOT [--self_test]

Documents: README.md, docs/*.md and deploy/README.md. A path is
  * an inline code span (`...`, outside fenced blocks) holding one word
    that starts with a top-level folder of the repository (`core/`,
    `tests/fault/soak_test.cc`, `client/*.h`), read from ROOT; a span with a
    placeholder (<name>, {a,b}, ...) is not a path, and a glob must match;
  * a Markdown link or image target that is not a URL or an anchor, read
    from the document's own folder.
Top-level folders are ROOT's, but hidden ones and build output (build*).
A file moved or renamed without its documents fails here, naming the
document and the path. --self_test also checks that a missing file, an
empty glob and a broken link, planted in a copy, are caught.
"""

import argparse
import glob
import os
import re
import sys

FENCE_RE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN_RE = re.compile(r"`([^`\s]+)`")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER_RE = re.compile(r"[<>{}|$]|\.\.\.")


def documents(root):
    docs = ["README.md", "deploy/README.md"]
    docs += sorted(os.path.relpath(p, root)
                   for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return [d for d in docs if os.path.exists(os.path.join(root, d))]


def top_folders(root):
    return {d for d in os.listdir(root)
            if os.path.isdir(os.path.join(root, d))
            and not d.startswith(".") and not d.startswith("build")}


def missing(root, doc, text, tops):
    """The paths `text` (the document `doc`) names that do not exist."""
    out = []
    prose = FENCE_RE.sub("", text)
    for span in SPAN_RE.findall(prose):
        path = span.rstrip(".,;:")
        if "/" not in path or path.split("/")[0] not in tops:
            continue
        if PLACEHOLDER_RE.search(path):
            continue
        where = os.path.join(root, path)
        found = glob.glob(where) if "*" in path else os.path.exists(where)
        if not found:
            out.append(path)
    for target in LINK_RE.findall(prose):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if not os.path.exists(os.path.join(root, os.path.dirname(doc), path)):
            out.append(target)
    return out


def check(root, texts):
    """Errors for {doc: text} (empty: every path exists)."""
    tops = top_folders(root)
    return ["%s names %s, which does not exist" % (doc, path)
            for doc, text in sorted(texts.items())
            for path in missing(root, doc, text, tops)]


def self_test(root, texts):
    """Failures to catch a planted mistake (empty: the test bites)."""
    cases = [
        ("a missing file", "`core/engine/no_such_file.h`", "no_such_file.h"),
        ("an empty glob", "`client/*.no_such_ext`", "*.no_such_ext"),
        ("a broken link", "[x](no_such_doc.md)", "no_such_doc.md"),
    ]
    failures = []
    for what, planted, want in cases:
        got = check(root, dict(texts, **{"docs/API.md":
                                         texts["docs/API.md"] + "\n" + planted}))
        if not any(want in e for e in got):
            failures.append("self-test: %s was not caught (errors: %s)"
                            % (what, got))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    texts = {}
    for doc in documents(args.root):
        with open(os.path.join(args.root, doc), encoding="utf-8") as fh:
            texts[doc] = fh.read()
    errors = check(args.root, texts)
    if args.self_test and not errors:
        errors = self_test(args.root, texts)
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
