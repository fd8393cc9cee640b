"""A planted skip (planted_skips/CMakeLists.txt): one test passes, one skips."""
import unittest


class Planted(unittest.TestCase):
    def test_passes(self):
        self.assertTrue(True)

    def test_skips(self):
        self.skipTest('planted: this skip must fail the run')


if __name__ == '__main__':
    unittest.main()
