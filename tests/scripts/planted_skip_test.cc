// A planted skip for scripts.no_skips_self_test (no_skips_test.py): built
// with the suite but never registered with it. The self-test registers this
// binary in a planted ctest project and expects scripts/ctest-no-skips to
// fail the run, naming PlantedSkip.Skips.
#include "gtest/gtest.h"

namespace {

TEST(PlantedSkip, Passes) { SUCCEED(); }

TEST(PlantedSkip, Skips) { GTEST_SKIP() << "planted: this skip must fail the run"; }

}  // namespace
