"""A planted skip (planted_skips/CMakeLists.txt): one test passes, one skips."""
import pytest


def test_passes():
    assert True


def test_skips():
    pytest.skip('planted: this skip must fail the run')
