# The libFuzzer build (docs/FUZZING.md), switched on by -DSTAGGER_FUZZ=ON
# (scripts/fuzz configures build-fuzz/ with clang++-14). Included by the
# top-level CMakeLists.txt before any target exists: every library the fuzz
# targets link is instrumented for coverage (-fsanitize=fuzzer-no-link) and
# built with ASan+UBSan, halting on the first error; the targets themselves
# add -fsanitize=fuzzer (libFuzzer's main) in tests/fuzz/CMakeLists.txt.
option(STAGGER_FUZZ "Build only the libFuzzer targets of tests/fuzz (clang)" OFF)
if(NOT STAGGER_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "STAGGER_FUZZ needs clang (scripts/fuzz configures "
          "clang++-14); got ${CMAKE_CXX_COMPILER_ID}")
endif()
if(NOT STAGGER_SANITIZE STREQUAL "")
  message(FATAL_ERROR "STAGGER_FUZZ brings its own sanitizers; leave "
          "STAGGER_SANITIZE empty")
endif()
set(stagger_fuzz_flags -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
add_compile_options(-fsanitize=fuzzer-no-link ${stagger_fuzz_flags})
add_link_options(${stagger_fuzz_flags})
