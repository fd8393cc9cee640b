#!/usr/bin/python3
"""scripts/prose-check measures what issue 29 defines, and its ratchet
catches a guide that gets worse.

Each rule of the measure is shown on a planted text whose count is known
by hand; then the script is run on planted files (a long sentence reported
at its line, the exit codes), and the ratchet on planted measures (each
kind of regression caught, a clean one passing).

  prose_check_test.py
"""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "prose-check")


def load():
    loader = importlib.machinery.SourceFileLoader("prose_check", SCRIPT)
    spec = importlib.util.spec_from_loader("prose_check", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


pc = load()


def counts(text):
    """[words of each sentence] of `text`."""
    return [n for _, n, _ in pc.sentences_of(text)]


def words(n, first="Word"):
    """A sentence of exactly n words, ending with a period."""
    return " ".join([first] + ["w%d" % i for i in range(1, n)]) + "."


class Measure(unittest.TestCase):
    def test_plain_paragraph(self):
        self.assertEqual(counts("One two three four. Five six seven.\n"),
                         [4, 3])

    def test_each_mark_ends_a_sentence(self):
        for mark in ".!?:;":
            text = "Alpha beta gamma%s Delta epsilon zeta.\n" % mark
            self.assertEqual(counts(text), [3, 3], mark)

    def test_what_may_start_the_next_sentence(self):
        for start in ("Capital", "`code`", "**bold**", "(aside)", '"quoted"',
                      "'quoted'"):
            text = "Alpha beta gamma. %s then more words.\n" % start
            self.assertEqual(counts(text), [3, 4], start)

    def test_no_end_before_lowercase_or_without_space(self):
        # "e.g. this", "1.5 s", "x.y": not ends.
        self.assertEqual(counts("It waits e.g. this long, 1.5 s, in x.y "
                                "files.\n"), [10])
        self.assertEqual(counts("Ends here.Next starts here.\n"), [4])

    def test_short_pieces_are_not_sentences(self):
        # "Yes." and "Go on." are under 3 words: not counted at all.
        self.assertEqual(counts("Yes. Go on. Three words here.\n"), [3])

    def test_code_span_is_one_word_and_link_its_text(self):
        self.assertEqual(counts("Run `a b c d e` now please.\n"), [4])
        self.assertEqual(counts("Read [the long guide](docs/x.md) now.\n"),
                         [5])
        self.assertEqual(counts("See ![a chart](c.png) and [ref][1] here.\n"),
                         [6])
        # A bracket inside a code span is code.
        self.assertEqual(counts("Call `f([x](y))` right now.\n"), [4])

    def test_left_out(self):
        text = "\n".join([
            "# A heading of many words that is not a sentence",
            "",
            "Kept one two.",
            "",
            "```sh",
            "fenced code. Not prose at all here.",
            "```",
            "",
            "~~~",
            "Tilde fenced. Not prose.",
            "~~~",
            "",
            "| a table | row. Not | prose |",
            "|---|---|---|",
            "",
            "<!-- a comment. Over",
            "two lines. Not prose. -->",
            "",
            "    indented code. Not prose at all.",
            "    still code. Not prose.",
            "",
            "Kept three four.",
        ])
        self.assertEqual(counts(text), [3, 3])

    def test_list_items_are_prose_without_markers(self):
        text = "\n".join([
            "- First item has five.",
            "* Second item here.",
            "+ Third item here.",
            "1. Numbered item here.",
            "2) Another numbered one.",
            "- An item that",
            "  continues on a second line.",
            "    With four spaces: still the item, not code.",
        ])
        self.assertEqual(counts(text), [4, 3, 3, 3, 3, 8, 8])

    def test_prose_runs_on_without_a_mark(self):
        # Items (and paragraphs) without a closing mark run together.
        text = "- one two\n- three four\n\nFive six seven.\n"
        self.assertEqual(counts(text), [7])

    def test_line_of_each_sentence(self):
        text = "Para one is here.\n\n# Head\n\nSecond para starts\nhere and " \
               "ends. Third one starts\non line six.\n"
        self.assertEqual([line for line, _, _ in pc.sentences_of(text)],
                         [1, 5, 6])

    def test_long_sentences_counted(self):
        text = words(40) + " " + words(41) + "\n"
        m = pc.measure_text(text)
        self.assertEqual((m["sentences"], m["over"]), (2, 1))
        self.assertEqual(m["long"][0][1], 41)
        self.assertAlmostEqual(m["average"], 40.5)


class Script(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args),
                              capture_output=True, text=True, timeout=60)

    def test_reports_long_sentence_at_its_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "planted.md")
            with open(path, "w") as f:
                f.write("# Title\n\nShort and fine here.\n\n%s\n"  # 4, 41 words
                        % words(41, "Planted"))
            r = self.run_script(path)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("planted.md:5: 41 words: Planted w1", r.stdout)
            self.assertRegex(r.stdout, r"\nall\s+2\s+22\.5\s+1\n")

    def test_good_text_passes(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "good.md")
            with open(path, "w") as f:
                f.write("One idea per sentence. Short ones read well.\n")
            r = self.run_script(path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_ratchet_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "doc.md")
            ratchet = os.path.join(d, "ratchet.json")
            with open(doc, "w") as f:
                f.write(words(30) + " " + words(10) + "\n")  # average 20
            r = self.run_script("--write-baseline", ratchet, doc)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.run_script("--baseline", ratchet,
                                             doc).returncode, 0)
            with open(doc, "a") as f:
                f.write(words(45) + "\n")
            r = self.run_script("--baseline", ratchet, doc)
            self.assertEqual(r.returncode, 1)
            self.assertIn("worse than its baseline (20.0 words on average, "
                          "0 over 40)", r.stdout)

    def test_bad_usage_and_missing_file(self):
        self.assertEqual(self.run_script("--nope").returncode, 2)
        self.assertEqual(self.run_script("/no/such/file.md").returncode, 2)


def measure(average, over):
    return {"average": average, "over": over}


class Ratchet(unittest.TestCase):
    BASE = {"meets": ["docs/GOOD.md"],
            "baseline": {"docs/OLD.md": {"average": 24.0, "over": 3}}}

    def check(self, measured):
        return pc.check_baseline(measured, self.BASE)

    def test_holding_passes(self):
        self.assertEqual(self.check({"docs/GOOD.md": measure(17.0, 0),
                                     "docs/OLD.md": measure(23.0, 3)}), [])

    def test_each_regression_caught(self):
        cases = [
            ("average worse", {"docs/OLD.md": measure(24.2, 3)},
             "docs/OLD.md: worse than its baseline"),
            ("more long sentences", {"docs/OLD.md": measure(22.0, 4)},
             "docs/OLD.md: worse than its baseline"),
            ("a meeting file over the average",
             {"docs/GOOD.md": measure(18.2, 0)},
             "docs/GOOD.md: listed as meeting the target"),
            ("a meeting file with a long sentence",
             {"docs/GOOD.md": measure(12.0, 1)},
             "docs/GOOD.md: listed as meeting the target"),
            ("a new file outside the ratchet", {"docs/NEW.md": measure(9, 0)},
             "docs/NEW.md: not in the ratchet"),
            ("a baseline file now meeting the target",
             {"docs/OLD.md": measure(17.5, 0)},
             "docs/OLD.md: now meets the target"),
        ]
        for what, changed, want in cases:
            measured = {"docs/GOOD.md": measure(17.0, 0),
                        "docs/OLD.md": measure(23.0, 3)}
            measured.update(changed)
            problems = self.check(measured)
            self.assertTrue(any(want in p for p in problems),
                            "%s not caught: %s" % (what, problems))

    def test_gone_file_caught(self):
        problems = self.check({"docs/GOOD.md": measure(17.0, 0)})
        self.assertTrue(any("docs/OLD.md: in the ratchet but not measured"
                            in p for p in problems), problems)

    def test_written_ratchet_holds_what_it_measured(self):
        measured = {"a.md": measure(17.96, 0), "b.md": measure(25.04, 2)}
        ratchet = pc.baseline_of(measured)
        self.assertEqual(ratchet, {"meets": ["a.md"], "baseline": {
            "b.md": {"average": 25.0, "over": 2}}})
        self.assertEqual(pc.check_baseline(measured, json.loads(
            json.dumps(ratchet))), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
