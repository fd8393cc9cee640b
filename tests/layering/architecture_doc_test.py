#!/usr/bin/python3
"""layering.architecture_doc: docs/ARCHITECTURE.md's layer table says what
tests/layering/layers.py enforces.

  architecture_doc_test.py SOURCE_DIR

The table under "## Layers and what each may include" has one row per rule
of layers.RULES:
  | `folder` → `target`, ... | holds | may include |
  - the layer cell names the rule's folder first (`core/engine`, `agent/`;
    `client/*.h` and `server/main.cc` name the folder they are in), then,
    after "→", the CMake targets built there: each must be defined
    (add_library, add_executable, add_custom_target) in a CMakeLists.txt
    of that folder, a folder above it or one below it;
  - the may-include cell lists, separated by commas, exactly what the
    rule allows: its library kinds by the names of layers.KIND_NAMES
    ("Abseil", "gRPC", "generated code", ...; the standard library goes
    unsaid) and its project entries in backticks (`core`, `client/*.h`
    for "client/.", `core/engine/clock.h`).
Every rule has a row, every row is a rule, no row twice, and the cell holds
nothing else. The self-test first plants each kind of drift (in a copy of
the document, or in a copy of the rules) and fails if any goes uncaught.
"""

import copy
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402

DOC = "docs/ARCHITECTURE.md"
SECTION_RE = re.compile(r"^## Layers and what each may include\n(.*?)(?=^## |\Z)",
                        re.S | re.M)
ROW_RE = re.compile(r"^\|(.*)\|(.*)\|(.*)\|\s*$")
TICKED = re.compile(r"`([^`]+)`")
TARGET_DEF = re.compile(
    r"add_(?:library|executable|custom_target)\(\s*([A-Za-z0-9_.+-]+)")
NAME_KINDS = {name: kind for kind, name in layers.KIND_NAMES.items()}


def entry_name(entry):
    """A rule's project entry as the table writes it."""
    return "client/*.h" if entry == "client/." else entry


def table_rows(doc_text):
    """[(layer cell, may-include cell)] of the layer table, or None."""
    m = SECTION_RE.search(doc_text)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        r = ROW_RE.match(line)
        if r and r.group(1).strip().startswith("`"):
            rows.append((r.group(1).strip(), r.group(3).strip()))
    return rows


def layer_of(cell):
    """(folder, [targets]) a layer cell names."""
    before, _, after = cell.partition("→")
    names = TICKED.findall(before)
    if not names:
        return None, []
    first = names[0].rstrip("/")
    if "*" in first or first.endswith((".cc", ".h")):
        first = os.path.dirname(first)
    return first, TICKED.findall(after)


def may_include_of(cell):
    """({library kinds}, {project entries}, [words it does not know])."""
    kinds, entries, unknown = {"std"}, set(), []
    for item in (i.strip() for i in cell.split(",")):
        ticked = re.fullmatch(r"`([^`]+)`", item)
        if ticked:
            name = ticked.group(1).rstrip("/")
            entries.add("client/." if name == "client/*.h" else name)
        elif item in NAME_KINDS:
            kinds.add(NAME_KINDS[item])
        else:
            unknown.append(item)
    return kinds, entries, unknown


def cmake_targets(root):
    """{target: [folders whose CMakeLists.txt defines it]}."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and
                   d not in ("node_modules", "tests")]
        if "CMakeLists.txt" in names:
            with open(os.path.join(dirpath, "CMakeLists.txt"),
                      encoding="utf-8") as f:
                text = f.read()
            folder = os.path.relpath(dirpath, root)
            for t in TARGET_DEF.findall(text):
                out.setdefault(t, []).append(folder)
    return out


def related(a, b):
    """Whether folder a is b, above it or below it."""
    return a == b or a == "." or b.startswith(a + "/") or \
        a.startswith(b + "/")


def check(doc_text, rules, targets):
    """Drift between the table and `rules`, as readable lines."""
    rows = table_rows(doc_text)
    if rows is None:
        return ["%s has no \"## Layers and what each may include\" section"
                % DOC]
    problems = []
    by_folder = {name: (libs, entries) for name, libs, entries in rules}
    seen = set()
    for layer_cell, may_cell in rows:
        folder, names = layer_of(layer_cell)
        if folder in seen:
            problems.append("%s: the table has two rows for %s" % (DOC, folder))
        seen.add(folder)
        if folder not in by_folder:
            problems.append("%s: the table's row %s is no rule of "
                            "tests/layering/layers.py" % (DOC, layer_cell))
            continue
        libs, entries = by_folder[folder]
        kinds, said, unknown = may_include_of(may_cell)
        for word in unknown:
            problems.append("%s: %s's \"may include\" has \"%s\": write a "
                            "`folder` or one of %s" % (
                                DOC, folder, word,
                                ", ".join(sorted(NAME_KINDS))))
        if kinds != set(libs) or said != set(entries):
            problems.append(
                "%s: %s may include, says the table: %s; says layers.py: %s"
                % (DOC, folder, describe(kinds, said),
                   describe(set(libs), set(entries))))
        for t in names:
            if not any(related(f, folder) for f in targets.get(t, [])):
                problems.append("%s: %s's target %s is defined in no "
                                "CMakeLists.txt of that folder, above or "
                                "below it" % (DOC, folder, t))
    for name, _, _ in rules:
        if name not in seen:
            problems.append("%s: the layer table has no row for %s (a rule "
                            "of tests/layering/layers.py)" % (DOC, name))
    return problems


def describe(kinds, entries):
    names = sorted(layers.KIND_NAMES[k] for k in kinds if k != "std")
    return ", ".join(names + sorted("`%s`" % entry_name(e) for e in entries)) \
        or "the standard library only"


def replace_row(doc_text, folder, fn):
    """doc_text with the row of `folder` replaced by fn(row) (None: gone)."""
    out = []
    for line in doc_text.split("\n"):
        r = ROW_RE.match(line)
        if r and r.group(1).strip().startswith("`") and \
                layer_of(r.group(1).strip())[0] == folder:
            line = fn(line)
            if line is None:
                continue
        out.append(line)
    return "\n".join(out)


def self_test(doc_text, targets):
    """Each kind of drift, planted, must be caught."""
    rules = layers.RULES
    looser = copy.deepcopy(rules)
    for i, (name, libs, entries) in enumerate(looser):
        if name == "agent/status":
            looser[i] = (name, libs, entries + ["core/rpc"])
    cases = [
        ("a rule changed in layers.py only", doc_text, looser,
         "agent/status may include, says the table"),
        ("a rule without its row",
         replace_row(doc_text, "core/lease", lambda line: None), rules,
         "no row for core/lease"),
        ("a row for no rule",
         replace_row(doc_text, "core/cli", lambda line: line + "\n" +
                     line.replace("core/cli", "core/gone")), rules,
         "row `core/gone` → `stagger_cli` is no rule"),
        ("a row twice",
         replace_row(doc_text, "core/rpc", lambda line: line + "\n" + line),
         rules, "two rows for core/rpc"),
        ("the agent said to include nothing of the client",
         replace_row(doc_text, "agent", lambda line:
                     line.replace(", `client/*.h`", "")), rules,
         "agent may include, says the table"),
        ("a word the table does not know",
         replace_row(doc_text, "core/engine", lambda line:
                     line.replace("| Abseil |", "| Abseil, gRPC stubs |")),
         rules, "core/engine's \"may include\" has \"gRPC stubs\""),
        ("a target that does not exist",
         replace_row(doc_text, "core/wire", lambda line:
                     line.replace("`stagger_wire`", "`stagger_wires`")),
         rules, "core/wire's target stagger_wires is defined in no"),
        ("no section", doc_text.replace("## Layers and what each may include",
                                        "## Layers"), rules,
         "no \"## Layers and what each may include\" section"),
    ]
    failures = []
    for what, text, plant_rules, want in cases:
        got = check(text, plant_rules, targets)
        if not any(want in p for p in got):
            failures.append("self-test: %s was not caught (problems: %s)"
                            % (what, got))
    return failures


def main():
    root = sys.argv[1]
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        doc_text = f.read()
    targets = cmake_targets(root)
    problems = self_test(doc_text, targets)
    problems += check(doc_text, layers.RULES, targets)
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("OK: %s's layer table is layers.py's %d rules (each kind of drift, "
          "planted, was caught)" % (DOC, len(layers.RULES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
