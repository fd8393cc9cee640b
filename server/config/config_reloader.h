// ConfigReloader: watches a config file and applies each valid new version
// to a running engine::Engine (Engine::SetConfig: atomic, endpoint state
// kept). An invalid version is refused: the engine keeps the config it has.
//
// Change detection, by polling (no inotify: it misses Kubernetes' ConfigMap
// symlink swaps unless every directory in the chain is watched, and polling
// a few-KB file once a second costs nothing). Every poll_interval the
// poller reads the file, following symlinks, and compares the bytes with
// the last version it saw. That catches every way a file changes:
//   - an in-place rewrite (even one within the file system's timestamp
//     granularity, which a stat-only check can miss),
//   - a rename over the path (editors, `mv new config.textproto`),
//   - Kubernetes' atomic ConfigMap update: config.textproto ->
//     ..data/config.textproto, ..data -> ..2026_01_01_00_00_00.123, and
//     ..data is replaced by rename to point at a new directory.
// To avoid applying a half-written file, the file's identity (resolved
// path, device, inode, size, mtime, ctime) is taken before and after the
// read; if it moved, the poll is skipped and the next one reads again.
// A touch or rewrite with identical bytes does not reload (nothing to
// apply). The same bad bytes are reported once, not at every poll; a file
// that disappears is reported once (as a failed reload) and the old config
// kept; when it comes back with new bytes it is loaded.
//
// ReloadNow() (SIGHUP) always reloads, even if the bytes are unchanged.
//
// Outcome of every reload attempt: on success Engine::SetConfig, one line
// on stderr, on_result(true, OK). On failure the engine is untouched, every
// error line (each starting with the file name, then the field path) goes
// to stderr, and on_result(false, error).
//
// Thread-safety: all methods may be called from any thread. Reloads (the
// poller's, ReloadNow's, PollOnce's) are serialized; on_result runs on the
// reloading thread, never concurrently with itself, and must not call back
// into this ConfigReloader. `engine` must outlive the reloader.
#ifndef STAGGER_SERVER_CONFIG_CONFIG_RELOADER_H_
#define STAGGER_SERVER_CONFIG_CONFIG_RELOADER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"

namespace stagger::config {

class ConfigReloader {
 public:
  // ok == status.ok(); status is the error (with file name and field paths)
  // of a refused reload.
  using ResultCallback = std::function<void(bool ok, const absl::Status&)>;

  struct Options {
    // Time between polls. Must be > 0. Default 1s.
    absl::Duration poll_interval = absl::Seconds(1);
    // Called after every reload attempt; may be empty.
    ResultCallback on_result;
    // The bytes the engine's current config was loaded from (main reads
    // the file once with ReadConfigFile and loads it with LoadConfigText).
    // Unset: the file as it is when the reloader is constructed is taken
    // to be what the engine runs; a change between the caller's load and
    // that construction would then go unnoticed until the next change.
    std::optional<std::string> applied_content;
  };

  // Does not start polling; see Start().
  ConfigReloader(std::string path, engine::Engine* engine, Options options);
  ~ConfigReloader();  // Stop()
  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // Starts the polling thread. InvalidArgument if poll_interval <= 0,
  // FailedPrecondition if already running.
  absl::Status Start();
  // Stops and joins the polling thread (a poll in progress finishes first).
  // Idempotent; Start() may be called again afterwards.
  void Stop();

  // Reads the file now and applies it if valid, whatever its bytes. The
  // result is also passed to on_result. For SIGHUP: call it from a normal
  // thread, not from the signal handler.
  absl::Status ReloadNow();

  // One poll, as the thread does it: returns true if a reload was attempted
  // (the bytes changed, or the file could newly not be read). Lets tests
  // and callers with their own loop drive the reloader deterministically.
  bool PollOnce();

  const std::string& path() const { return path_; }
  int64_t reloads_succeeded() const;
  int64_t reloads_failed() const;

 private:
  // Applies `bytes` (read from path_) and reports the outcome.
  absl::Status Apply(const std::string& bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  void Report(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  void Run();

  const std::string path_;
  engine::Engine* const engine_;
  const absl::Duration poll_interval_;
  const ResultCallback on_result_;

  // Serializes reloads and guards what the poller remembers.
  mutable absl::Mutex reload_mu_;
  // The last bytes read (applied or refused); nullopt: never read.
  std::optional<std::string> last_bytes_ ABSL_GUARDED_BY(reload_mu_);
  // Message of the last read error reported, so it is reported once.
  std::optional<std::string> last_read_error_ ABSL_GUARDED_BY(reload_mu_);
  int64_t succeeded_ ABSL_GUARDED_BY(reload_mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(reload_mu_) = 0;

  // Start/Stop are serialized by lifecycle_mu_; mu_ wakes the poller.
  absl::Mutex lifecycle_mu_;
  std::thread thread_ ABSL_GUARDED_BY(lifecycle_mu_);
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stagger::config

#endif  // STAGGER_SERVER_CONFIG_CONFIG_RELOADER_H_
