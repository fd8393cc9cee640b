// Files for tests, all synchronous:
//   ScratchDir   a fresh directory under $TMPDIR (else /tmp), removed with
//                everything in it when destroyed. ok() is false if it could
//                not be made: a test ASSERTs it before use.
//   WriteFile    writes a file whole (created or truncated); false on error.
//   ReadFile     a file's bytes; "" if it cannot be read.
//   ReplaceFile  writes PATH.tmp and renames it over PATH, the way editors
//                and config tools replace a file (a new inode, never a
//                half-written file); false on error.
#ifndef STAGGER_TESTS_TESTING_FILES_H_
#define STAGGER_TESTS_TESTING_FILES_H_

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stagger::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base ? base : "/tmp",
                                    "/stagger_test.XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // path()/name
  std::string operator/(absl::string_view name) const {
    return absl::StrCat(path_, "/", name);
  }

 private:
  std::string path_;
};

inline bool WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  return f.good();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool ReplaceFile(const std::string& path, absl::string_view text) {
  const std::string tmp = path + ".tmp";
  return WriteFile(tmp, text) && std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_FILES_H_
