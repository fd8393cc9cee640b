#!/usr/bin/python3
"""The verdict tables of the documents agree with the proto and each other.

  verdict_tables_test.py --proto coordinator.proto DOC... [--self_test]

Each DOC (README.md, docs/API.md) has one table whose header row starts
"| verdict | meaning | reasons |"; a row is | `VERDICT` | meaning | reasons |
and its reasons are the backticked UPPER_CASE names in the last cell
(`PAUSED`; `AdmitRequest.wait` and other prose are not names). Checked, per
document:
  1. one row per value of the proto's enum Verdict (but VERDICT_UNSPECIFIED);
  2. every value of its enum Reason (but REASON_UNSPECIFIED) listed exactly
     once, and no other name;
and across documents: each reason under the same verdict in all of them.
A reason added to the proto without a row, or moved in one document only,
fails here naming it. --self_test also checks that those mistakes, planted
in a copy, are caught.
"""

import argparse
import re
import sys

HEADER = "| verdict | meaning | reasons |"
ROW_RE = re.compile(r"^\|\s*`([A-Z_]+)`\s*\|.*\|([^|]*)\|\s*$")
NAME_RE = re.compile(r"`([A-Z][A-Z_]*)`")


def enum_values(proto_text, enum):
    """The value names of `enum` in the proto, in order."""
    m = re.search(r"^enum %s \{(.*?)^\}" % enum, proto_text, re.S | re.M)
    if not m:
        return None
    return re.findall(r"^\s*([A-Z][A-Z0-9_]*)\s*=\s*\d+\s*;", m.group(1), re.M)


def table(doc_text):
    """[(verdict, [reasons])] of the verdict table, or None without one."""
    lines = doc_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(HEADER):
            rows = []
            for row in lines[i + 2:]:
                m = ROW_RE.match(row)
                if not m:
                    break
                rows.append((m.group(1), NAME_RE.findall(m.group(2))))
            return rows
    return None


def check_doc(name, doc_text, verdicts, reasons):
    """(errors, {reason: verdict}) for one document."""
    rows = table(doc_text)
    if rows is None:
        return ["%s has no verdict table (\"%s\")" % (name, HEADER)], {}
    errors, where = [], {}
    listed = [v for v, _ in rows]
    if sorted(listed) != sorted(verdicts):
        errors.append("%s: the table's verdicts are %s, the proto's %s"
                      % (name, listed, verdicts))
    for verdict, names in rows:
        for r in names:
            if r not in reasons:
                errors.append("%s: %s lists %s, which is not a Reason of the "
                              "proto" % (name, verdict, r))
            elif r in where:
                errors.append("%s: %s is listed twice (%s and %s)"
                              % (name, r, where[r], verdict))
            else:
                where[r] = verdict
    for r in reasons:
        if r not in where:
            errors.append("%s: reason %s is in no row" % (name, r))
    return errors, where


def check(proto_text, docs):
    """Errors for [(name, text)] (empty: every table agrees)."""
    verdicts = [v for v in enum_values(proto_text, "Verdict") or []
                if v != "VERDICT_UNSPECIFIED"]
    reasons = [r for r in enum_values(proto_text, "Reason") or []
               if r != "REASON_UNSPECIFIED"]
    if not verdicts or not reasons:
        return ["the proto has no enum Verdict or Reason"]
    errors, maps = [], []
    for name, text in docs:
        e, where = check_doc(name, text, verdicts, reasons)
        errors += e
        maps.append((name, where))
    first_name, first = maps[0]
    for name, where in maps[1:]:
        for r, v in sorted(where.items()):
            if r in first and first[r] != v:
                errors.append("%s lists %s under %s, %s under %s"
                              % (first_name, r, first[r], name, v))
    return errors


def self_test(proto_text, docs):
    """Failures to catch a planted mistake (empty: the test bites)."""
    (name, text), rest = docs[0], docs[1:]
    moved = text.replace("`DEADLINE`", "deadline", 1).replace(
        "`SUCCEEDED`", "`SUCCEEDED`, `DEADLINE`", 1)
    cases = [
        ("a reason missing from a table",
         [(name, text.replace("`RELEASED`", "released"))] + rest,
         "reason RELEASED is in no row"),
        ("a name that is not a reason",
         [(name, text.replace("`DEADLINE`", "`DEAD_LINE`", 1))] + rest,
         "DEAD_LINE, which is not a Reason"),
        ("a reason under another verdict in one document only",
         [(name, moved)] + rest, "lists DEADLINE under DONE"),
        ("a reason added to the proto without a row",
         None, "reason NEW_REASON is in no row"),
        ("no table", [(name, text.replace(HEADER, "| verdict |"))] + rest,
         "has no verdict table"),
    ]
    failures = []
    for what, planted, want in cases:
        if planted is None:
            got = check(proto_text.replace("RELEASED = 17;",
                                           "RELEASED = 17;\n  NEW_REASON = 99;"),
                        docs)
        else:
            got = check(proto_text, planted)
        if not any(want in e for e in got):
            failures.append("self-test: %s was not caught (errors: %s)"
                            % (what, got))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto", required=True)
    ap.add_argument("docs", nargs="+")
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    with open(args.proto, encoding="utf-8") as fh:
        proto_text = fh.read()
    docs = []
    for path in args.docs:
        with open(path, encoding="utf-8") as fh:
            docs.append((path, fh.read()))
    errors = check(proto_text, docs)
    if args.self_test and not errors:
        errors = self_test(proto_text, docs)
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
