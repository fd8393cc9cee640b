#include "staggerctl/fan_out.h"

#include <ostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stagger::staggerctl {

absl::StatusOr<std::vector<std::string>> SplitAddresses(
    const std::string& address_list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(address_list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--address: an empty address in \"", address_list,
          "\" (expected HOST:PORT or a comma-separated list of them)"));
    }
    out.emplace_back(part);
  }
  return out;
}

int CombineExitCodes(const std::vector<int>& codes) {
  bool any_ok = false;
  int first_failure = kOk;
  int first_other_failure = kOk;
  for (int c : codes) {
    if (c == kOk) {
      any_ok = true;
      continue;
    }
    if (first_failure == kOk) first_failure = c;
    if (c != kNotFound && first_other_failure == kOk) first_other_failure = c;
  }
  if (first_other_failure != kOk) return first_other_failure;
  return any_ok ? kOk : first_failure;
}

int RunOnEachAddress(const std::vector<std::string>& args,
                     const CommandOptions& options, const Connect& connect,
                     std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<std::string>> addresses =
      SplitAddresses(options.address);
  if (!addresses.ok()) {
    err << "staggerctl: " << addresses.status().message() << "\n";
    return kUsage;
  }
  std::vector<int> codes;
  for (const std::string& address : *addresses) {
    auto channel = connect(address);
    if (!channel.ok()) {
      err << "staggerctl: " << channel.status().message() << "\n";
      return kUsage;
    }
    if (addresses->size() > 1) {
      (options.json ? err : out) << "== " << address << " ==\n";
    }
    CommandOptions one = options;
    one.address = address;
    const int code = RunCommand(args, one, *std::move(channel), out, err);
    if (code == kUsage) return kUsage;
    codes.push_back(code);
  }
  return CombineExitCodes(codes);
}

}  // namespace stagger::staggerctl
