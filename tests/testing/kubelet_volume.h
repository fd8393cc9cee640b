// KubeletVolume: a ConfigMap or Secret volume in an existing directory,
// written and updated the way the kubelet's AtomicWriter does, so that a
// file watcher sees here what it sees in a pod:
//   DIR/NAME -> ..data/NAME      one symlink per file, made by the first
//                                Update
//   DIR/..data -> ..VERSION      swapped atomically: a new symlink
//                                DIR/..data_tmp renamed over ..data
//   DIR/..VERSION/NAME           one version's files
// Update(files) writes a new version holding `files` (name -> contents),
// swaps ..data to it and removes the previous version; every update names
// the same files. False if any step fails. Not thread-safe.
#ifndef STAGGER_TESTS_TESTING_KUBELET_VOLUME_H_
#define STAGGER_TESTS_TESTING_KUBELET_VOLUME_H_

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tests/testing/files.h"

namespace stagger::testing {

class KubeletVolume {
 public:
  explicit KubeletVolume(std::string dir) : dir_(std::move(dir)) {}

  // DIR/NAME: the path a pod reads (a symlink into ..data).
  std::string path(absl::string_view name) const {
    return absl::StrCat(dir_, "/", name);
  }

  bool Update(const std::map<std::string, std::string>& files) {
    const std::string old = current_;
    // ..2026_12_02_00_00_00.000, ..2026_12_02_00_01_00.000, ...
    current_ = absl::StrCat("..2026_12_02_00_",
                            absl::Dec(version_++, absl::kZeroPad2), "_00.000");
    const std::string version_dir = path(current_);
    if (mkdir(version_dir.c_str(), 0755) != 0) return false;
    for (const auto& [name, contents] : files) {
      if (!WriteFile(absl::StrCat(version_dir, "/", name), contents)) {
        return false;
      }
    }
    const std::string tmp = path("..data_tmp");
    if (symlink(current_.c_str(), tmp.c_str()) != 0 ||
        rename(tmp.c_str(), path("..data").c_str()) != 0) {
      return false;
    }
    if (old.empty()) {  // the first version: the files' own symlinks
      for (const auto& [name, contents] : files) {
        const std::string target = absl::StrCat("..data/", name);
        if (symlink(target.c_str(), path(name).c_str()) != 0) return false;
      }
      return true;
    }
    std::error_code ec;
    std::filesystem::remove_all(path(old), ec);
    return !ec;
  }

 private:
  const std::string dir_;
  std::string current_;  // "" before the first Update
  int version_ = 0;
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_KUBELET_VOLUME_H_
