#include "staggerctl/args.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagger::staggerctl {

absl::StatusOr<Positional> ParseArgs(int argc, char** argv) {
  Positional out;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (only_positional || !absl::StartsWith(arg, "-") || arg == "-") {
      out.args.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    if (arg == "--helpfull") {
      out.helpfull = true;
      continue;
    }
    absl::string_view body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (staggerctl --help lists them)"));
    }
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(body.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " needs a value"));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, "=", value, ": ", error));
    }
  }
  return out;
}

}  // namespace stagger::staggerctl
