// ConfigReloader; see config_reloader.h for the contract.
#include "server/config/config_reloader.h"

#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/config/config_loader.h"

namespace stagger::config {
namespace {

// What the path points at right now. Two equal identities taken around a
// read mean nothing replaced or modified the file during the read (as far
// as the file system's timestamps can tell).
struct Identity {
  bool exists = false;
  std::string resolved;  // realpath(): every symlink in the chain resolved
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  struct timespec mtime = {};
  struct timespec ctime = {};

  bool operator==(const Identity& o) const {
    return exists == o.exists && resolved == o.resolved && dev == o.dev &&
           ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
  bool operator!=(const Identity& o) const { return !(*this == o); }
};

Identity IdentityOf(const std::string& path) {
  Identity id;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return id;  // follows symlinks
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  id.mtime = st.st_mtim;
  id.ctime = st.st_ctim;
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) id.resolved = buf;
  return id;
}

// One write per message so lines from concurrent writers do not interleave.
void Log(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

ConfigReloader::ConfigReloader(std::string path, engine::Engine* engine,
                               Options options)
    : path_(std::move(path)),
      engine_(engine),
      poll_interval_(options.poll_interval),
      on_result_(std::move(options.on_result)) {
  absl::MutexLock l(&reload_mu_);
  if (options.applied_content.has_value()) {
    last_bytes_ = std::move(options.applied_content);
  } else if (absl::StatusOr<std::string> bytes = ReadConfigFile(path_);
             bytes.ok()) {
    last_bytes_ = *std::move(bytes);
  }
}

ConfigReloader::~ConfigReloader() { Stop(); }

absl::Status ConfigReloader::Start() {
  if (poll_interval_ <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("poll_interval must be > 0, got ",
                     absl::FormatDuration(poll_interval_)));
  }
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("config reloader already running");
  }
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ConfigReloader::Stop() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (!thread_.joinable()) return;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ConfigReloader::Run() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      // Wakes early only when Stop() sets stopping_.
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), poll_interval_)) {
        return;
      }
    }
    PollOnce();
  }
}

bool ConfigReloader::PollOnce() {
  absl::MutexLock l(&reload_mu_);
  const Identity before = IdentityOf(path_);
  absl::StatusOr<std::string> bytes = ReadConfigFile(path_);
  const Identity after = IdentityOf(path_);
  if (before != after) return false;  // changing under us: next poll

  if (!bytes.ok()) {
    const std::string message(bytes.status().message());
    if (last_read_error_ == message) return false;  // already reported
    last_read_error_ = message;
    Report(bytes.status());
    return true;
  }
  last_read_error_.reset();
  if (last_bytes_ == *bytes) return false;  // same content: nothing to do
  last_bytes_ = *bytes;
  Apply(*bytes).IgnoreError();  // reported by Apply itself
  return true;
}

absl::Status ConfigReloader::ReloadNow() {
  absl::MutexLock l(&reload_mu_);
  absl::StatusOr<std::string> bytes = ReadConfigFile(path_);
  if (!bytes.ok()) {
    last_read_error_ = std::string(bytes.status().message());
    Report(bytes.status());
    return bytes.status();
  }
  last_read_error_.reset();
  last_bytes_ = *bytes;
  return Apply(*bytes);
}

absl::Status ConfigReloader::Apply(const std::string& bytes) {
  absl::StatusOr<engine::EngineConfig> config = LoadConfigText(bytes, path_);
  if (config.ok()) {
    engine_->SetConfig(*std::move(config));
    Report(absl::OkStatus());
    return absl::OkStatus();
  }
  Report(config.status());
  return config.status();
}

void ConfigReloader::Report(const absl::Status& status) {
  if (status.ok()) {
    ++succeeded_;
    Log(absl::StrCat("stagger: config reloaded from ", path_, "\n"));
  } else {
    ++failed_;
    std::string text = absl::StrCat("stagger: config reload from ", path_,
                                    " refused, keeping the current config:\n");
    for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
      absl::StrAppend(&text, "stagger:   ", line, "\n");
    }
    Log(text);
  }
  if (on_result_) on_result_(status.ok(), status);
}

int64_t ConfigReloader::reloads_succeeded() const {
  absl::MutexLock l(&reload_mu_);
  return succeeded_;
}

int64_t ConfigReloader::reloads_failed() const {
  absl::MutexLock l(&reload_mu_);
  return failed_;
}

}  // namespace stagger::config
