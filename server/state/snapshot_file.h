// SnapshotFile: the state file's framing (proto/stagger/v1/snapshot.proto,
// "FILE LAYOUT"): header (magic, format version), a stream of records, a
// trailer (payload length, CRC-32C).
//
// Writing is atomic: SnapshotWriter writes PATH.tmp in the same directory,
// fsyncs it, renames it over PATH and fsyncs the directory, so PATH is
// always the previous complete snapshot or the new one, never a mix, even
// if the process or the machine dies half-way. One writer per PATH.
//
// Loading never crashes and never throws: LoadSnapshot() answers with an
// outcome (loaded / missing / unreadable / truncated / corrupt /
// incompatible version) and a message naming the file and what was wrong.
// Records reach the caller only once the whole file has checked out
// (framing, version, CRC, every record parses), so a bad file delivers
// nothing and the caller starts fresh.
//
// Memory is bounded by one record and a 1 MiB buffer, not by the file: a
// snapshot of a million endpoints is streamed both ways.
//
// Limits: one field of the payload (an endpoint record, a pause, a
// disabled endpoint, the writer's name) at most kMaxRecordBytes (a key is at most 4096 bytes, a
// record under 5 KiB). The reader finds a file with a bigger one corrupt;
// the writer refuses to write one (InvalidArgument naming it, nothing
// written; the snapshot can go on).
//
// The encoding is protobuf's own: the payload's tags, lengths and varints
// and the frame's little-endian numbers go through CodedOutputStream and
// CodedInputStream (google/protobuf/io/coded_stream.h), the records through
// the generated messages; this file adds the framing and the checks.
#ifndef STAGGER_SERVER_STATE_SNAPSHOT_FILE_H_
#define STAGGER_SERVER_STATE_SNAPSHOT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stagger/v1/snapshot.pb.h"

namespace stagger::state {

inline constexpr uint32_t kSnapshotFormatVersion = 1;
inline constexpr size_t kMaxRecordBytes = size_t{1} << 20;
inline constexpr size_t kSnapshotHeaderBytes = 16;
inline constexpr size_t kSnapshotTrailerBytes = 16;

enum class LoadOutcome : uint8_t {
  kLoaded = 0,
  kMissing = 1,              // no file at PATH (a first start)
  kUnreadable = 2,           // open/read failed (permissions, I/O error)
  kTruncated = 3,            // the file ends before its trailer
  kCorrupt = 4,              // not a snapshot, CRC mismatch, bad record
  kIncompatibleVersion = 5,  // another format version
};
inline constexpr int kNumLoadOutcomes = 6;
// "loaded", "missing", "unreadable", "truncated", "corrupt",
// "incompatible_version" (the metric's reason label).
const char* LoadOutcomeName(LoadOutcome o);

struct LoadResult {
  LoadOutcome outcome = LoadOutcome::kMissing;
  std::string message;  // for the log: the file and what was wrong
  int64_t written_unix_nanos = 0;
  std::string writer;
  int64_t records = 0;  // endpoint records delivered (kLoaded only)
  int64_t pauses = 0;   // pauses delivered (kLoaded only)
  int64_t disabled = 0;  // disabled endpoints delivered (kLoaded only)
};

using RecordSink = absl::FunctionRef<void(const v1::state::Endpoint&)>;
using PauseSink = absl::FunctionRef<void(const v1::state::Pause&)>;

using DisabledSink = absl::FunctionRef<void(const v1::state::Disabled&)>;

// Reads the snapshot at `path`; calls `pause_sink` once per pause, `sink`
// once per endpoint record and `disabled_sink` once per disabled endpoint,
// in file order, only if the outcome is kLoaded.
LoadResult LoadSnapshot(const std::string& path, RecordSink sink,
                        PauseSink pause_sink, DisabledSink disabled_sink);
// The same, skipping the disabled endpoints.
LoadResult LoadSnapshot(const std::string& path, RecordSink sink,
                        PauseSink pause_sink);
// The same, skipping the pauses.
LoadResult LoadSnapshot(const std::string& path, RecordSink sink);

class SnapshotWriter {
 public:
  // Starts a snapshot for `path`: creates (truncates) `path`.tmp and writes
  // the header and the snapshot's own fields.
  static absl::StatusOr<std::unique_ptr<SnapshotWriter>> Begin(
      const std::string& path, int64_t written_unix_nanos,
      const std::string& writer);
  // Not committed: removes the temporary file; `path` is untouched.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // InvalidArgument for a record over kMaxRecordBytes (see Limits).
  absl::Status Add(const v1::state::Endpoint& record);
  absl::Status AddPause(const v1::state::Pause& pause);
  absl::Status AddDisabled(const v1::state::Disabled& disabled);
  // Trailer, fsync, rename over `path`, fsync of the directory. The writer
  // is spent afterwards, whatever the result.
  absl::Status Commit();
  int64_t records() const { return records_; }
  int64_t bytes() const { return written_; }

 private:
  SnapshotWriter(std::string path, std::string tmp_path, int fd);
  // Makes room for `n` more bytes at the end of the buffer; returns where.
  uint8_t* Extend(size_t n);
  // Counts buffer_[from, end) as payload (CRC-32C, length); flushes the
  // buffer once it holds kBufferBytes.
  absl::Status EndPayload(size_t from);
  // Appends field `field` of the Snapshot, length-delimited: its tag and
  // length, then the `size` bytes `body` writes at the pointer it is given.
  // `what` names the field in the error for a size over kMaxRecordBytes.
  absl::Status AddLengthDelimited(int field, absl::string_view what,
                                  size_t size,
                                  absl::FunctionRef<void(uint8_t*)> body);
  absl::Status Flush();
  absl::Status Fail(const std::string& step, int err);

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  std::string buffer_;
  uint32_t crc_ = 0;
  int64_t payload_bytes_ = 0;
  int64_t written_ = 0;
  int64_t records_ = 0;
};

}  // namespace stagger::state

#endif  // STAGGER_SERVER_STATE_SNAPSHOT_FILE_H_
