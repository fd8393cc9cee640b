#!/usr/bin/python3
"""A program's flags, its --help and its guide's flag table stay in step.

  flags_documented_test.py --binary BIN --doc DOC [--folder PATH]
                           [--section TITLE] [--no_transport_table]
                           [--self_test]
  flags_documented_test.py --binary BIN --folder PATH --print_table

staggerd (the defaults: --folder server, --section Flags, with the
Transport limits table) against docs/OPERATING.md; stagger-agent with
--folder agent against docs/AGENT.md; the other programs with flags
(staggerctl, the example worker, the bench tools) against the tables their
guides hold under their own heading (--section "`staggerctl`'s flags"). The
--binary's old name, --staggerd, still works.

The flags the binary defines are read from the binary itself: `BIN
--helpfull` groups every flag under "Flags from FILE:" with its default
("default: VALUE;"), and the groups whose FILE is under --folder (a folder
or one file of the repository) are the program's own (Abseil's and the
libraries' are elsewhere). Then:

  1. `BIN --help` names every one of them (`--name`);
  2. the document's table under the heading TITLE (any level; the section
     runs to the next heading of the same or a higher level) has one row
     per flag (| `--flag` | default | meaning |), and no row for a flag the
     binary does not define;
  3. each row's default is the binary's: the cell starts with the value in
     backticks (`10s`, `127.0.0.1:50051`), or with "empty" for an empty
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
document in memory, is caught (so this test can fail). --print_table
prints a table of the binary's flags with their defaults and help texts, a
draft for a new guide.
"""

import argparse
import os
import re
import subprocess
import sys

GROUP_RE = re.compile(r"^\s*Flags from (\S+):\s*$")
FLAG_RE = re.compile(r"^\s+--([A-Za-z0-9_]+) \(")
ROW_RE = re.compile(r"^\|\s*`--([A-Za-z0-9_]+)`\s*\|([^|]*)\|(.*)\|\s*$")
SECTION = "Flags"
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def help_output(binary, mode):
    """Output of `BIN --<mode>` (Abseil prints it and exits non-zero)."""
    r = subprocess.run([binary, "--" + mode], stdout=subprocess.PIPE,
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
PROGRAM = "staggerd"
# Flags each program has always had (they guard the parsing itself; other
# programs must define at least one flag).
MUST = {"server": ("address", "config", "metrics_address"),
        "agent": ("listen", "coordinator", "metrics_address")}


def is_own_file(path):
    """Whether a "Flags from FILE" group is the program's: FILE under
    FOLDER, or FOLDER itself (a file), however the build wrote the path.
    For a folder, the same rule as core/cli/usage.cc's IsFlagFileUnder."""
    if FOLDER.endswith((".cc", ".h")):
        return path == FOLDER or path.endswith("/" + FOLDER)
    return path.startswith(FOLDER + "/") or "/%s/" % FOLDER in path


def section_span(doc_text):
    """(start, end) offsets of the text under the heading SECTION, to the
    next heading of the same or a higher level; None without that
    heading."""
    offset = 0
    level = None
    start = None
    for line in doc_text.splitlines(keepends=True):
        h = HEADING_RE.match(line.rstrip("\n"))
        if start is None:
            if h and h.group(2) == SECTION:
                level = len(h.group(1))
                start = offset + len(line)
        elif h and len(h.group(1)) <= level:
            return start, offset
        offset += len(line)
    return None if start is None else (start, len(doc_text))


def section_text(doc_text):
    span = section_span(doc_text)
    return None if span is None else doc_text[span[0]:span[1]]


def in_section(doc_text, fn):
    """doc_text with fn(the section's text) in place of that text."""
    start, end = section_span(doc_text)
    return doc_text[:start] + fn(doc_text[start:end]) + doc_text[end:]


def flag_rows(doc_text):
    """[(flag, default cell, meaning cell)] of the SECTION's table, or None
    without that section."""
    text = section_text(doc_text)
    if text is None:
        return None
    rows = []
    for line in text.splitlines():
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
        return ["the document has no \"%s\" heading" % SECTION]
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
            errors.append("the flag table lists --%s, which %s does not "
                          "define" % (flag, PROGRAM))
    return errors


TRANSPORT_RE = re.compile(
    r"^Transport limits \(.*?\n\n(?P<table>(?:\|[^\n]*\n)+)", re.S | re.M)
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
                errors.append("Transport limits names --%s, which %s "
                              "does not define" % (flag, PROGRAM))
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


def check_binary(binary):
    """({flag: default} of the program's own flags, errors)."""
    errors = []
    full = parse_help(help_output(binary, "helpfull"))
    defined = {}
    for path, flags in full.items():
        if is_own_file(path):
            defined.update(flags)
    print("%s defines: %s" % (PROGRAM, ", ".join(sorted(defined))))
    # Guards the parsing itself: these flags have always existed.
    for must in MUST.get(FOLDER, ()):
        if must not in defined:
            errors.append("--helpfull parsing found no --%s (groups: %s)"
                          % (must, sorted(full)))
    if not defined:
        errors.append("--helpfull shows no flag from a file under %s "
                      "(groups: %s)" % (FOLDER, sorted(full)))
    for flag, value in sorted(defined.items()):
        if value is None:
            errors.append("--helpfull shows no default for --%s" % flag)
    short = help_output(binary, "help")
    for flag in sorted(defined):
        if not re.search(r"--%s(?![A-Za-z0-9_])" % re.escape(flag), short):
            errors.append("--%s is missing from `%s --help`" % (flag, PROGRAM))
    return defined, errors


def help_texts(text):
    """{flag: help text} from Abseil's --helpfull output."""
    out = {}
    for flag, joined in _entries(text):
        m = re.match(r"--[A-Za-z0-9_]+ \((.*)\); default: .*$", joined)
        out[flag] = m.group(1) if m else ""
    return out


def _entries(text):
    entries, entry = [], None
    for line in text.splitlines():
        if GROUP_RE.match(line):
            entry = None
        elif FLAG_RE.match(line):
            entry = [FLAG_RE.match(line).group(1), line.strip()]
            entries.append(entry)
        elif entry is not None and line.strip():
            entry[1] += " " + line.strip()
        else:
            entry = None
    return entries


def print_table(binary):
    """A draft of the program's flag table, from the binary."""
    text = help_output(binary, "helpfull")
    own = {}
    for path, flags in parse_help(text).items():
        if is_own_file(path):
            own.update(flags)
    helps = help_texts(text)
    print("| Flag | Default | Meaning |\n|---|---|---|")
    for flag in sorted(own):
        value = own[flag]
        print("| `--%s` | %s | %s |" % (
            flag, "empty" if value == "" else "`%s`" % value,
            helps.get(flag, "").replace("|", "\\|")))


def self_test(defined, doc_text):
    """Each kind of mistake, made on a copy of the document, is caught."""
    failures = []
    rows = flag_rows(doc_text)
    flag, default, _ = rows[0]
    row_re = re.compile(r"^\|\s*`--%s`\s*\|.*\n" % re.escape(flag), re.M)
    def sub(replacement):  # in the flag table's section only
        return in_section(doc_text, lambda text: row_re.sub(
            replacement, text, count=1))

    cases = [
        ("a flag without a row", sub(""), "--%s has no row" % flag),
        ("a row without a flag",
         sub(lambda m: m.group(0) + "| `--no_such_flag` | `1` | gone |\n"),
         "lists --no_such_flag, which %s does not define" % PROGRAM),
        ("a default changed in the document only",
         sub("| `--%s` | `changed` | x |\n" % flag),
         "--%s: the table's default" % flag),
        ("no section", re.sub(r"^(#+ )%s$" % re.escape(SECTION),
                              r"\1Renamed", doc_text, count=1, flags=re.M),
         "no \"%s\" heading" % SECTION),
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
    ap.add_argument("--binary", "--staggerd", dest="binary", required=True)
    ap.add_argument("--doc",
                    help="the document with the tables (docs/OPERATING.md)")
    ap.add_argument("--self_test", action="store_true")
    ap.add_argument("--folder", default="server",
                    help="the repository folder (or file) whose flags are "
                    "the program's own")
    ap.add_argument("--section", default="Flags",
                    help="the heading of the flag table")
    ap.add_argument("--no_transport_table", action="store_true")
    ap.add_argument("--print_table", action="store_true")
    args = ap.parse_args()
    global FOLDER, TRANSPORT, PROGRAM, SECTION
    FOLDER = args.folder.rstrip("/")
    TRANSPORT = not args.no_transport_table
    PROGRAM = os.path.basename(args.binary)
    SECTION = args.section
    if args.print_table:
        print_table(args.binary)
        return 0
    if not args.doc:
        ap.error("--doc is required")

    defined, errors = check_binary(args.binary)
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
