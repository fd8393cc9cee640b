#!/usr/bin/env python3
"""scripts/function-length measures what it says and fails when it must.

Snippets of C++ with known function lengths, including the constructs that
could fool a brace counter (braces in comments, strings, raw strings and
character literals, initializer lists with braces, nested classes after an
access specifier, data initializers, lambdas); runs of the script itself
on a file with a 61-line function (exit 1) and a 60-line one (0), with an
exclusion that is needed (0) and one that is stale (1), and on a path that
does not exist (2); the same for Python (from the parsed module: nested
defs part of theirs), TypeScript (methods, arrow functions, braces in
template literals and object literals) and Go (methods, function literals,
braces in raw strings and runes), and generated files and node_modules
skipped; and the default scope: core/, server/, client/, bench/, agent/
when it exists, an error when a required folder is missing.
"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCRIPT = os.path.join(ROOT, 'scripts', 'function-length')


def load():
    loader = importlib.machinery.SourceFileLoader('function_length', SCRIPT)
    spec = importlib.util.spec_from_loader('function_length', loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


fl = load()


def lengths(src):
    return [n for _, n in fl.functions(src)]


def body(n):
    """A function whose body spans n lines (braces included), n >= 2."""
    return 'int F() {\n' + '  x();\n' * (n - 2) + '}\n'


class FunctionLengthTest(unittest.TestCase):
    def test_counts_from_open_to_close_brace(self):
        self.assertEqual(lengths(body(2)), [2])
        self.assertEqual(lengths(body(61)), [61])
        self.assertEqual(lengths('void f() { g(); }\n'), [1])

    def test_braces_in_comments_and_literals_do_not_count(self):
        src = ('void f() {\n'
               '  // }\n'
               '  /* } { */\n'
               '  s = "}";\n'
               "  c = '}';\n"
               '  r = R"x(}{)" )x";\n'
               '  n = 1\'000;\n'
               '}\n'
               'void g() {\n}\n')
        self.assertEqual(lengths(src), [8, 2])

    def test_classes_namespaces_and_access_specifiers_are_scopes(self):
        src = ('namespace a {\n'
               'class C {\n'
               ' public:\n'
               '  struct S {\n'
               '    int M() const {\n'
               '      return 1;\n'
               '    }\n'
               '  };\n'
               '  void N() { if (x) { y(); } }\n'
               '};\n'
               '}  // namespace a\n')
        self.assertEqual(lengths(src), [3, 1])

    def test_an_initializer_list_with_braces_counts_with_its_body(self):
        src = ('C::C(int a)\n'
               '    : a_{a},\n'
               '      b_(2) {\n'
               '  f();\n'
               '}\n')
        self.assertEqual(lengths(src), [4])

    def test_data_initializers_are_not_functions(self):
        src = ('const int kX[] = {\n1,\n2,\n3,\n};\n'
               'std::array<int, 2> y{};\n'
               'int f() {\n  auto l = [] { return 1; };\n  return l();\n}\n')
        self.assertEqual(lengths(src), [4])

    def test_the_script_fails_over_the_limit_and_passes_at_it(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, 'bad.cc')
            ok = os.path.join(d, 'ok.cc')
            with open(bad, 'w') as f:
                f.write(body(61))
            with open(ok, 'w') as f:
                f.write(body(60))
            r = subprocess.run([SCRIPT, bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn('bad.cc:1: 61 lines (max 60)', r.stdout)
            r = subprocess.run([SCRIPT, ok], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout)
            r = subprocess.run([SCRIPT, '--exclude', bad, bad],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout)
            # Excluded by the end of its path, as tests/scripts does.
            r = subprocess.run([SCRIPT, '--exclude', 'bad.cc', d],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout)

    def test_a_stale_exclusion_fails(self):
        with tempfile.TemporaryDirectory() as d:
            ok = os.path.join(d, 'ok.cc')
            with open(ok, 'w') as f:
                f.write(body(60))
            for gone in ('ok.cc', 'renamed.cc'):  # within the limit; absent
                r = subprocess.run([SCRIPT, '--exclude', gone, d],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(f'{gone}: stale --exclude', r.stdout)

    def test_a_path_that_does_not_exist_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([SCRIPT, os.path.join(d, 'nope')],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn('no such file or folder', r.stderr)


def lang_lengths(name, src):
    return [n for _, n in fl.functions_in(name, src)]


class OtherLanguagesTest(unittest.TestCase):
    def test_python_counts_from_its_header_to_its_last_statement(self):
        src = ('def f(a,\n'
               '      b):\n'
               '    """Doc."""\n'
               '    def inner():\n'
               '        return 1\n'
               '    return inner()\n'
               '\n'
               'class C:\n'
               '    def m(self):\n'
               '        x = """\n'
               'text at column 0\n'
               '"""\n'
               '        return x\n')
        self.assertEqual(lang_lengths('a.py', src), [5, 5])

    def test_typescript_methods_arrows_and_literals(self):
        src = ('export class Loop {\n'
               '  private readonly x = { a: 1 };\n'
               '  run(n: number): Promise<void> {\n'
               '    const s = `}${n}{`;\n'
               '    f({ a: () => { return 1; } });\n'
               '    return g();\n'
               '  }\n'
               '}\n'
               'export const h = async (x: string) => {\n'
               '  // }\n'
               '  return x;\n'
               '};\n'
               'export interface I {\n  a: number;\n}\n'
               'const data = {\n  b: 2,\n};\n')
        self.assertEqual(lang_lengths('a.ts', src), [5, 4])

    def test_go_methods_literals_and_raw_strings(self):
        src = ('package p\n'
               'type T struct {\n  a int\n}\n'
               'func (t *T) M() int {\n'
               '\tf := func() { _ = `}` }\n'
               "\t_ = '}'\n"
               '\treturn 1\n'
               '}\n'
               'var m = map[string]int{\n"a": 1,\n}\n'
               'func g() {}\n')
        self.assertEqual(lang_lengths('a.go', src), [5, 1])

    def test_each_language_fails_over_the_limit_and_generated_code_is_skipped(self):
        bodies = {
            'bad.py': 'def f():\n' + '    x()\n' * 60,
            'bad.ts': 'function f() {\n' + '  x();\n' * 59 + '}\n',
            'bad.go': 'package p\nfunc f() {\n' + '\tx()\n' * 59 + '}\n',
        }
        with tempfile.TemporaryDirectory() as d:
            for name, text in bodies.items():
                with open(os.path.join(d, name), 'w') as f:
                    f.write(text)
            os.makedirs(os.path.join(d, 'node_modules'))
            with open(os.path.join(d, 'node_modules', 'dep.ts'), 'w') as f:
                f.write(bodies['bad.ts'])
            with open(os.path.join(d, 'gen.go'), 'w') as f:
                f.write('// Code generated by x. DO NOT EDIT.\n' + bodies['bad.go'])
            r = subprocess.run([SCRIPT, d], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(sorted(l.split(': ')[0] for l in r.stdout.splitlines()), [
                os.path.relpath(os.path.join(d, n)) + ':' + line
                for n, line in (('bad.go', '2'), ('bad.py', '1'), ('bad.ts', '1'))])
            self.assertNotIn('node_modules', r.stdout)
            self.assertNotIn('gen.go', r.stdout)
            self.assertIn('61 lines (max 60)', r.stdout)


class DefaultScopeTest(unittest.TestCase):
    def make(self, d, folders):
        for f in folders:
            os.makedirs(os.path.join(d, f))

    def names(self, roots):
        return [os.path.basename(r) for r in roots]

    def test_the_repositorys_code_is_in_scope(self):
        self.assertEqual(self.names(fl.default_roots()),
                         ['core', 'server', 'client', 'bench', 'agent',
                          'staggerctl', 'examples'])

    def test_agent_is_in_scope_when_it_exists(self):
        with tempfile.TemporaryDirectory() as d:
            self.make(d, ['core', 'server', 'client', 'bench'])
            self.assertEqual(self.names(fl.default_roots(d)),
                             ['core', 'server', 'client', 'bench'])
            self.make(d, ['agent'])
            self.assertEqual(self.names(fl.default_roots(d)),
                             ['core', 'server', 'client', 'bench', 'agent'])

    def test_a_missing_required_folder_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            self.make(d, ['core', 'server', 'bench'])
            with self.assertRaisesRegex(FileNotFoundError, 'client'):
                fl.default_roots(d)


if __name__ == '__main__':
    unittest.main()
