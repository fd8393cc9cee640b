#!/usr/bin/python3
"""staggerd's flags, its --help and docs/OPERATING.md's flag table stay in
step.

  flags_documented_test.py --staggerd BIN --doc docs/OPERATING.md [--self_test]
  flags_documented_test.py --staggerd BIN --folder agent --doc docs/AGENT.md
                           --no_transport_table [--self_test]

(--folder: whose flags: those defined under that folder, "server" by
default; stagger-agent's are under agent/, its guide docs/AGENT.md, and it
has no Transport limits table.)

The flags the binary defines are read from the binary itself: `staggerd
--helpfull` groups every flag under "Flags from FILE:" with its default
("default: VALUE;"), and the groups whose FILE is under a server/ folder
are staggerd's own (Abseil's are elsewhere). Then:

  1. `staggerd --help` lists every one of them;
  2. the document's table under "## Flags" has one row per flag
     (| `--flag` | default | meaning |), and no row for a flag the binary
     does not define;
  3. each row's default is the binary's: the cell starts with the value in
     backticks (`10s`, `0.0.0.0:50051`), or with "empty" for an empty
     string; and its meaning is not empty.

  4. its "Transport limits" table (under "## Limits") repeats some
     of those defaults in words: each flag a row names in its flag cell
     must exist, and its default, written the way the table writes it
     (67108864 as "64 MiB", 30m as "30 min", 10s as "10 s"), must appear in
     the row's default cell, or in parentheses right after the flag
     ("`--max_ping_strikes` (2)"). Boolean flags are only checked to exist.

A flag added without a row, a row left behind after a flag is removed, or
a default changed in one place only fails here, naming the flag.
--self_test also checks that each of those mistakes, made on a copy of the
document in memory, is caught (so this test can fail).
"""

import argparse
import os
import re
import subprocess
import sys

GROUP_RE = re.compile(r"^\s*Flags from (\S+):\s*$")
FLAG_RE = re.compile(r"^\s+--([A-Za-z0-9_]+) \(")
ROW_RE = re.compile(r"^\|\s*`--([A-Za-z0-9_]+)`\s*\|([^|]*)\|(.*)\|\s*$")
SECTION = "## Flags"
SECTION_RE = re.compile(r"^%s\n(.*?)(?=^## |\Z)" % re.escape(SECTION),
                        re.S | re.M)


def help_output(staggerd, mode):
    """Output of `staggerd --<mode>` (Abseil prints it and exits non-zero)."""
    r = subprocess.run([staggerd, "--" + mode], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.stdout


def parse_help(text):
    """{file: {flag: default}} from Abseil's help output.

    A flag's entry starts with "--name (" and may continue on more indented
    lines; it ends with "default: VALUE;" (strings in double quotes).
    """
    out = {}
    group = None
    entry = None  # [flag, joined text]
    entries = []
    for line in text.splitlines():
        m = GROUP_RE.match(line)
        if m:
            group = out.setdefault(m.group(1), {})
            entry = None
            continue
        m = FLAG_RE.match(line)
        if m and group is not None:
            entry = [m.group(1), line.strip(), group]
            entries.append(entry)
        elif entry is not None and line.strip():
            entry[1] += " " + line.strip()
        else:
            entry = None
    for flag, joined, grp in entries:
        at = joined.rfind("; default: ")
        value = joined[at + len("; default: "):].rstrip(";").strip() \
            if at >= 0 else None
        if value is not None and len(value) >= 2 and value[0] == '"' \
                and value[-1] == '"':
            value = value[1:-1]
        grp[flag] = value
    return out


FOLDER = "server"
TRANSPORT = True
# Flags each program has always had (they guard the parsing itself).
MUST = {"server": ("address", "config", "metrics_address"),
        "agent": ("listen", "coordinator", "metrics_address")}


def is_staggerd_file(path):
    # The same rule as core/cli/usage.cc's IsFlagFileUnder(file, FOLDER).
    return path.startswith(FOLDER + "/") or "/%s/" % FOLDER in path


def flag_rows(doc_text):
    """[(flag, default cell, meaning cell)] of the "## Flags" table, or None
    without that section."""
    m = SECTION_RE.search(doc_text)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        r = ROW_RE.match(line)
        if r:
            rows.append((r.group(1), r.group(2).strip(), r.group(3).strip()))
    return rows


def default_documented(cell, value):
    if value == "":
        return cell.startswith("empty")
    return cell.startswith("`%s`" % value)


def check_flag_table(defined, doc_text):
    """Errors comparing {flag: default} with the document's flag table."""
    errors = []
    rows = flag_rows(doc_text)
    if rows is None:
        return ["the document has no \"%s\" section" % SECTION]
    by_flag = {}
    for flag, default, meaning in rows:
        if flag in by_flag:
            errors.append("the flag table lists --%s twice" % flag)
        by_flag[flag] = (default, meaning)
    for flag, value in sorted(defined.items()):
        if flag not in by_flag:
            errors.append("--%s has no row in the flag table" % flag)
            continue
        default, meaning = by_flag[flag]
        if not default_documented(default, value):
            errors.append(
                "--%s: the table's default \"%s\" is not the binary's (%s)"
                % (flag, default,
                   "empty" if value == "" else "`%s`" % value))
        if not meaning:
            errors.append("--%s: the table's row has no meaning" % flag)
    for flag in by_flag:
        if flag not in defined:
            errors.append("the flag table lists --%s, which staggerd "
                          "does not define" % flag)
    return errors


TRANSPORT_RE = re.compile(r"^Transport limits \(.*?\n\n(?P<table>(?:\|.*\n)+)",
                          re.S | re.M)
TRANSPORT_FLAG_RE = re.compile(r"`--([A-Za-z0-9_]+)`(?: \(([^)\s]+)\))?")
DURATION_UNITS = {"ms": "ms", "s": "s", "m": "min", "h": "h"}


def as_table_writes_it(flag, value):
    """A flag's default the way the Transport limits table writes it."""
    if flag.endswith("_bytes") and value.isdigit():
        n = int(value)
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20),
                           ("KiB", 1 << 10)):
            if n >= size and n % size == 0:
                return "%d %s" % (n // size, unit)
        return value
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", value)
    if m:
        return "%s %s" % (m.group(1), DURATION_UNITS[m.group(2)])
    return value


def transport_rows(doc_text):
    """[(default cell, flag cell)] of the Transport limits table, or None."""
    m = TRANSPORT_RE.search(doc_text)
    if not m:
        return None
    rows = []
    for line in m.group("table").splitlines()[2:]:  # header, separator
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            rows.append((cells[1], cells[2]))
    return rows


def check_transport_limits(defined, doc_text):
    """Errors comparing the Transport limits table with the binary."""
    rows = transport_rows(doc_text)
    if not rows:
        return ["the document has no \"Transport limits (...)\" table"]
    errors = []
    named = 0
    for default_cell, flag_cell in rows:
        for flag, stated in TRANSPORT_FLAG_RE.findall(flag_cell):
            named += 1
            if flag not in defined:
                errors.append("Transport limits names --%s, which staggerd "
                              "does not define" % flag)
                continue
            value = defined[flag]
            if value in ("true", "false"):
                continue
            want = as_table_writes_it(flag, value)
            if stated:
                ok = stated == want
            else:
                ok = re.search(r"(?<![\w.])%s(?![\w.])" % re.escape(want),
                               default_cell) is not None
            if not ok:
                errors.append(
                    "Transport limits: --%s's default is %s (`%s`), not in "
                    "its row (\"%s\" | \"%s\")"
                    % (flag, want, value, default_cell, flag_cell))
    if named == 0:
        errors.append("Transport limits table names no `--flag`")
    return errors


def replace_in_transport_table(doc_text, old, new):
    """doc_text with `old` replaced by `new` inside that table only."""
    m = TRANSPORT_RE.search(doc_text)
    table = m.group("table")
    assert old in table, old
    return (doc_text[:m.start("table")] + table.replace(old, new, 1) +
            doc_text[m.end("table"):])


def check_binary(staggerd):
    """({flag: default} of staggerd's own flags, errors)."""
    errors = []
    full = parse_help(help_output(staggerd, "helpfull"))
    defined = {}
    for path, flags in full.items():
        if is_staggerd_file(path):
            defined.update(flags)
    print("%s defines: %s" % (os.path.basename(staggerd),
                              ", ".join(sorted(defined))))
    # Guards the parsing itself: these flags have always existed.
    for must in MUST[FOLDER]:
        if must not in defined:
            errors.append("--helpfull parsing found no --%s (groups: %s)"
                          % (must, sorted(full)))
    for flag, value in sorted(defined.items()):
        if value is None:
            errors.append("--helpfull shows no default for --%s" % flag)
    listed = {f for flags in parse_help(help_output(staggerd, "help")).values()
              for f in flags}
    for flag in sorted(defined):
        if flag not in listed:
            errors.append("--%s is missing from `staggerd --help`" % flag)
    return defined, errors


def self_test(defined, doc_text):
    """Each kind of mistake, made on a copy of the document, is caught."""
    failures = []
    rows = flag_rows(doc_text)
    flag, default, _ = rows[0]
    row_re = re.compile(r"^\|\s*`--%s`\s*\|.*\n" % re.escape(flag), re.M)
    cases = [
        ("a flag without a row", row_re.sub("", doc_text, count=1),
         "--%s has no row" % flag),
        ("a row without a flag",
         row_re.sub(lambda m: m.group(0) +
                    "| `--no_such_flag` | `1` | gone |\n",
                    doc_text, count=1),
         "lists --no_such_flag, which staggerd does not define"),
        ("a default changed in the document only",
         row_re.sub("| `--%s` | `changed` | x |\n" % flag, doc_text,
                    count=1),
         "--%s: the table's default" % flag),
        ("no section", doc_text.replace(SECTION + "\n", "## Flags, renamed\n"),
         "no \"%s\" section" % SECTION),
    ]

    def in_transport_table(old, new):
        return replace_in_transport_table(doc_text, old, new)

    transport_cases = [] if not TRANSPORT else [
        ("a transport default changed in the document only",
         in_transport_table("| 64 MiB", "| 32 MiB"),
         "--max_receive_message_bytes's default is 64 MiB"),
        ("a transport default in parentheses changed",
         in_transport_table("`--max_ping_strikes` (2)",
                            "`--max_ping_strikes` (3)"),
         "--max_ping_strikes's default is 2"),
        ("a transport flag renamed in the document only",
         in_transport_table("`--memory_quota_bytes`", "`--memory_quota`"),
         "names --memory_quota, which staggerd does not define"),
        ("no transport table",
         doc_text.replace("Transport limits (", "Transport limits, ", 1),
         "no \"Transport limits (...)\" table"),
    ]
    for what, text, want in cases + transport_cases:
        got = check_flag_table(defined, text)
        if TRANSPORT:
            got += check_transport_limits(defined, text)
        if not any(want in e for e in got):
            failures.append("self-test: %s was not caught (errors: %s)"
                            % (what, got))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staggerd", required=True)
    ap.add_argument("--doc", required=True,
                    help="the document with the tables (docs/OPERATING.md)")
    ap.add_argument("--self_test", action="store_true")
    ap.add_argument("--folder", default="server", choices=sorted(MUST))
    ap.add_argument("--no_transport_table", action="store_true")
    args = ap.parse_args()
    global FOLDER, TRANSPORT
    FOLDER = args.folder
    TRANSPORT = not args.no_transport_table

    defined, errors = check_binary(args.staggerd)
    with open(args.doc, encoding="utf-8") as fh:
        doc_text = fh.read()
    errors += check_flag_table(defined, doc_text)
    if TRANSPORT:
        errors += check_transport_limits(defined, doc_text)
    if args.self_test and not errors:
        errors += self_test(defined, doc_text)
    for e in errors:
        print("FAIL: %s: %s" % (args.doc, e))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
