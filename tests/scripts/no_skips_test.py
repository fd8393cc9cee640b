#!/usr/bin/env python3
"""scripts/ctest-no-skips fails a run in which any test skipped, naming it.

Each case configures the planted ctest project (planted_skips/) with one
way of skipping beside a test that passes, runs scripts/ctest-no-skips in
its build folder exactly as scripts/test does, and expects exit 1 and the
skipped test named; with nothing planted the same run must pass. The
gtest plants use a real GTEST_SKIP (stagger_planted_skip_test, whose path
CMake passes in PLANTED_GTEST). The inner runs' output is kept, not
printed (it holds the skip markers that the outer run looks for), and is
shown only when a case fails.
"""
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
SCRIPT = os.path.join(ROOT, 'scripts', 'ctest-no-skips')
PROJECT = os.path.join(HERE, 'planted_skips')


def planted_gtest():
    path = os.environ.get('PLANTED_GTEST', '')
    if not os.path.isfile(path):
        raise AssertionError(
            f'PLANTED_GTEST={path!r}: not a file; set it to the built '
            'stagger_planted_skip_test (ctest does: scripts.no_skips_self_test)')
    return path


def run_planted(plant):
    """Configures the planted project with PLANT=plant and runs the check
    in its build folder; returns (exit status, output)."""
    with tempfile.TemporaryDirectory() as build:
        conf = subprocess.run(
            ['cmake', '-S', PROJECT, '-B', build, f'-DPLANT={plant}',
             f'-DPLANTED_GTEST={planted_gtest()}'],
            capture_output=True, text=True)
        if conf.returncode != 0:
            raise AssertionError(f'configuring PLANT={plant} failed:\n'
                                 f'{conf.stdout}{conf.stderr}')
        # The planted Python tests must not write bytecode into the source
        # tree.
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
        r = subprocess.run([SCRIPT, '--timeout', '60'], cwd=build, env=env,
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


class NoSkipsTest(unittest.TestCase):
    def test_a_run_where_everything_ran_passes(self):
        status, out = run_planted('none')
        self.assertEqual(status, 0, out)
        self.assertNotIn('skipped:', out)

    def test_each_kind_of_skip_fails_the_run_naming_the_test(self):
        cases = {
            'exit_77': 'planted.exit_77',
            'gtest_discovered': 'planted.PlantedSkip.Skips',
            'gtest_added': 'planted.gtest_added',
            'unittest': 'planted.unittest',
            'pytest': 'planted.pytest',
            'node': 'planted.node',
            'disabled': 'planted.disabled',
        }
        for plant, name in cases.items():
            with self.subTest(plant=plant):
                status, out = run_planted(plant)
                self.assertEqual(status, 1, out)
                self.assertIn(f'scripts/test: skipped: {name} (', out)
                self.assertNotIn('skipped: planted.passes', out)
                self.assertNotIn('skipped: planted.PlantedSkip.Passes', out)

    def test_a_missing_report_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([SCRIPT, '--check', os.path.join(d, 'none.xml')],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn('no readable ctest report', r.stderr)


if __name__ == '__main__':
    unittest.main()
