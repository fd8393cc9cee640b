// Usage: what `--help` prints for a Stagger program. InstallUsage(message,
// folder) sets the program's usage message and makes --help (and
// --helpshort) list every flag defined in a file under the repository
// folder `folder` ("server" for staggerd, "agent" for stagger-agent),
// whatever the binary is called: Abseil's default lists only flags from a
// file named after the binary, which would list none. --helpfull still
// lists Abseil's own flags too. Call it once, before
// absl::ParseCommandLine.
//
// tests/server/flags_documented_test.py (and the agent's) check that every
// flag the binary defines under its folder appears in --help and in its
// guide's flag table, with the binary's default.
#ifndef STAGGER_CORE_CLI_USAGE_H_
#define STAGGER_CORE_CLI_USAGE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace stagger::cli {

// True for a flag defined in a file under a `folder`/ folder (the path as
// the compiler saw it: absolute, or relative to the build folder).
bool IsFlagFileUnder(absl::string_view filename, absl::string_view folder);

void InstallUsage(std::string message, std::string folder);

}  // namespace stagger::cli

#endif  // STAGGER_CORE_CLI_USAGE_H_
