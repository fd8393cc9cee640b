// Usage: what `staggerd --help` prints. InstallUsage() sets the program's
// usage message and makes --help (and --helpshort) list every flag defined
// in a file under the repository's server/ folder (main.cc and
// transport_flags.cc today), whatever the binary is called: Abseil's
// default lists only flags from a file named after the binary, which would
// list none. --helpfull still lists Abseil's own flags too. Call it once,
// before absl::ParseCommandLine.
//
// tests/server/flags_documented_test.py checks that every flag the binary
// defines under server/ appears in --help and in docs/OPERATING.md's flag
// table, with the binary's default.
#ifndef STAGGER_SERVER_DAEMON_USAGE_H_
#define STAGGER_SERVER_DAEMON_USAGE_H_

#include "absl/strings/string_view.h"

namespace stagger::daemon {

// True for a flag defined in a file under a "server/" folder (the path as
// the compiler saw it: absolute, or relative to the build folder).
bool IsStaggerdFlagFile(absl::string_view filename);

void InstallUsage();

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_USAGE_H_
