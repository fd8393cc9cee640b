// staggerctl's command line: flags anywhere ("--name=value", "--name
// value", "--bool"), the rest positional (the command and its operands).
// Parsed by hand over Abseil's flag registry so that every mistake is a
// clear one-line error and exit code 2 (Abseil's own parser exits 1 on an
// unknown flag), and "--help" prints the usage. "--helpfull" is Abseil's:
// every flag with its default (tests/server/flags_documented_test.py reads
// it), then exit 1.
#ifndef STAGGER_STAGGERCTL_ARGS_H_
#define STAGGER_STAGGERCTL_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stagger::staggerctl {

struct Positional {
  std::vector<std::string> args;  // args[0] is the command
  bool help = false;
  bool helpfull = false;
};

// Sets the flags it finds; InvalidArgument naming the flag for an unknown
// flag, a missing or bad value.
absl::StatusOr<Positional> ParseArgs(int argc, char** argv);

}  // namespace stagger::staggerctl

#endif  // STAGGER_STAGGERCTL_ARGS_H_
