#include "server/state/snapshot_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/wire_format_lite.h"
#include "server/state/crc32c.h"

namespace stagger::state {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

constexpr absl::string_view kMagic("\x89STGSNAP", 8);
constexpr absl::string_view kEndMagic("SNAP", 4);
constexpr size_t kBufferBytes = size_t{1} << 20;
// Snapshot's fields (snapshot.proto).
constexpr int kWrittenField = 1;
constexpr int kWriterField = 2;
constexpr int kPausesField = 14;
constexpr int kEndpointsField = 15;
constexpr int kDisabledField = 16;

const uint8_t* Bytes(absl::string_view s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Reads exactly `n` bytes at `offset`; false (errno set, or 0 at EOF) if not.
bool PreadAll(int fd, char* buf, size_t n, int64_t offset) {
  while (n > 0) {
    const ssize_t r = pread(fd, buf, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return false;
    }
    buf += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_;
};

LoadResult Outcome(LoadOutcome o, const std::string& path,
                   const std::string& what) {
  LoadResult r;
  r.outcome = o;
  r.message = absl::StrCat("state file ", path, " ", LoadOutcomeName(o), ": ",
                           what);
  return r;
}

// The checks of the fixed-size parts: header, version, trailer. Returns the
// payload's length and CRC, or the outcome that ends the load.
struct Frame {
  int64_t payload_bytes = 0;
  uint32_t crc = 0;
};
std::optional<LoadResult> CheckFrame(int fd, int64_t size,
                                     const std::string& path, Frame* frame) {
  std::string head(std::min<int64_t>(size, kSnapshotHeaderBytes), '\0');
  if (!PreadAll(fd, head.data(), head.size(), 0)) {
    return Outcome(LoadOutcome::kUnreadable, path,
                   absl::StrCat("read: ", ErrnoText(errno)));
  }
  const size_t cmp = std::min(head.size(), kMagic.size());
  if (head.compare(0, cmp, kMagic.data(), cmp) != 0) {
    return Outcome(LoadOutcome::kCorrupt, path,
                   "not a Stagger snapshot (no \\x89STGSNAP magic)");
  }
  if (head.size() < kSnapshotHeaderBytes) {
    return Outcome(LoadOutcome::kTruncated, path,
                   absl::StrCat(size, " bytes, shorter than the header"));
  }
  uint32_t version;
  CodedInputStream::ReadLittleEndian32FromArray(Bytes(head) + kMagic.size(),
                                                &version);
  if (version != kSnapshotFormatVersion) {
    return Outcome(LoadOutcome::kIncompatibleVersion, path,
                   absl::StrCat("format version ", version, ", this staggerd "
                                "reads version ", kSnapshotFormatVersion));
  }
  const int64_t framing = kSnapshotHeaderBytes + kSnapshotTrailerBytes;
  if (size < framing) {
    return Outcome(LoadOutcome::kTruncated, path,
                   absl::StrCat(size, " bytes, shorter than header and "
                                "trailer"));
  }
  std::string tail(kSnapshotTrailerBytes, '\0');
  if (!PreadAll(fd, tail.data(), tail.size(), size - kSnapshotTrailerBytes)) {
    return Outcome(LoadOutcome::kUnreadable, path,
                   absl::StrCat("read: ", ErrnoText(errno)));
  }
  if (tail.substr(12) != kEndMagic) {
    return Outcome(LoadOutcome::kTruncated, path,
                   absl::StrCat(size, " bytes, no trailer at the end (the "
                                "write did not finish)"));
  }
  uint64_t payload_bytes;
  CodedInputStream::ReadLittleEndian32FromArray(
      CodedInputStream::ReadLittleEndian64FromArray(Bytes(tail),
                                                    &payload_bytes),
      &frame->crc);
  frame->payload_bytes = static_cast<int64_t>(payload_bytes);
  if (frame->payload_bytes != size - framing) {
    return Outcome(LoadOutcome::kCorrupt, path,
                   absl::StrCat("the trailer gives ", frame->payload_bytes,
                                " payload bytes, the file holds ",
                                size - framing));
  }
  return std::nullopt;
}

// The CRC-32C of the payload, or the outcome that ends the load.
std::optional<LoadResult> CheckCrc(int fd, const Frame& frame,
                                   const std::string& path) {
  std::string buf;
  uint32_t crc = 0;
  int64_t offset = kSnapshotHeaderBytes;
  int64_t left = frame.payload_bytes;
  while (left > 0) {
    buf.resize(std::min<int64_t>(left, kBufferBytes));
    if (!PreadAll(fd, buf.data(), buf.size(), offset)) {
      return Outcome(LoadOutcome::kUnreadable, path,
                     absl::StrCat("read: ", ErrnoText(errno)));
    }
    crc = Crc32cExtend(crc, buf);
    offset += static_cast<int64_t>(buf.size());
    left -= static_cast<int64_t>(buf.size());
  }
  if (crc != frame.crc) {
    return Outcome(LoadOutcome::kCorrupt, path,
                   absl::StrCat("CRC-32C mismatch (file says ",
                                absl::Hex(frame.crc), ", payload has ",
                                absl::Hex(crc), ")"));
  }
  return std::nullopt;
}

// The messages one pass decodes into (reused), its sinks and its counts.
struct Delivery {
  const RecordSink* sink = nullptr;       // null: only check
  const PauseSink* pause_sink = nullptr;  // null: only check
  const DisabledSink* disabled_sink = nullptr;  // null: only check
  std::string bytes;
  v1::state::Endpoint record;
  v1::state::Pause pause;
  v1::state::Disabled disabled;
  int64_t records = 0;
  int64_t pauses = 0;
  int64_t disabled_count = 0;

  // One known length-delimited field of the Snapshot, read whole into
  // `bytes`: the writer's name, a pause or an endpoint record, parsed and
  // handed to its sink. An error text if it does not parse.
  std::optional<std::string> Field(int field, LoadResult* result) {
    if (field == kWriterField) {
      result->writer = bytes;
    } else if (field == kPausesField) {
      if (!pause.ParseFromString(bytes)) return "unparsable pause";
      ++pauses;
      if (pause_sink != nullptr) (*pause_sink)(pause);
    } else if (field == kDisabledField) {
      if (!disabled.ParseFromString(bytes)) return "unparsable disabled";
      ++disabled_count;
      if (disabled_sink != nullptr) (*disabled_sink)(disabled);
    } else {
      if (!record.ParseFromString(bytes)) return "unparsable endpoint";
      ++records;
      if (sink != nullptr) (*sink)(record);
    }
    return std::nullopt;
  }
};

bool KnownLengthDelimited(int field) {
  return field == kEndpointsField || field == kPausesField ||
         field == kDisabledField || field == kWriterField;
}

// A length-delimited field after its tag: at most kMaxRecordBytes; a known
// one is read whole and delivered, another skipped. An error text if not.
std::optional<std::string> ReadLengthDelimited(CodedInputStream* in, int field,
                                               Delivery* out,
                                               LoadResult* result) {
  uint64_t length;
  if (!in->ReadVarint64(&length)) return "bad length";
  if (length > kMaxRecordBytes) {
    return absl::StrCat("a field of ", length, " bytes, over the ",
                        kMaxRecordBytes, "-byte limit");
  }
  const int n = static_cast<int>(length);
  if (!KnownLengthDelimited(field)) {
    if (!in->Skip(n)) return "cut field";
    return std::nullopt;
  }
  if (!in->ReadString(&out->bytes, n)) return "cut field";
  return out->Field(field, result);
}

// One field of the Snapshot at `in`, its tag read: the time it was written
// is kept, the writer, pauses and endpoints delivered, fields of a newer
// writer skipped. An error text if it cannot be read.
std::optional<std::string> ReadField(CodedInputStream* in, uint32_t tag,
                                     Delivery* out, LoadResult* result) {
  const int field = WireFormatLite::GetTagFieldNumber(tag);
  switch (WireFormatLite::GetTagWireType(tag)) {
    case WireFormatLite::WIRETYPE_VARINT: {
      uint64_t value;
      if (!in->ReadVarint64(&value)) return "bad varint";
      if (field == kWrittenField) {
        result->written_unix_nanos = static_cast<int64_t>(value);
      }
      return std::nullopt;
    }
    case WireFormatLite::WIRETYPE_FIXED64:
      if (!in->Skip(8)) return "cut field";
      return std::nullopt;
    case WireFormatLite::WIRETYPE_FIXED32:
      if (!in->Skip(4)) return "cut field";
      return std::nullopt;
    case WireFormatLite::WIRETYPE_LENGTH_DELIMITED:
      return ReadLengthDelimited(in, field, out, result);
    default:
      return absl::StrCat("wire type ", WireFormatLite::GetTagWireType(tag),
                          " of field ", field);
  }
}

// One pass over the payload's fields. With null sinks it only checks that
// everything parses. Fills `result` (outcome kLoaded) or the failure.
// Each field gets a CodedInputStream of its own: one reads at most INT_MAX
// bytes in all, and a payload may be longer.
void ParsePayload(int fd, const Frame& frame, const std::string& path,
                  const RecordSink* sink, const PauseSink* pause_sink,
                  const DisabledSink* disabled_sink, LoadResult* result) {
  if (lseek(fd, kSnapshotHeaderBytes, SEEK_SET) < 0) {
    *result = Outcome(LoadOutcome::kUnreadable, path,
                      absl::StrCat("seek: ", ErrnoText(errno)));
    return;
  }
  google::protobuf::io::FileInputStream file(fd, kBufferBytes);
  google::protobuf::io::LimitingInputStream payload(&file, frame.payload_bytes);
  Delivery out;
  out.sink = sink;
  out.pause_sink = pause_sink;
  out.disabled_sink = disabled_sink;
  while (payload.ByteCount() < frame.payload_bytes) {
    CodedInputStream in(&payload);
    const uint32_t tag = in.ReadTagNoLastTag();
    std::optional<std::string> bad =
        tag == 0 ? "bad field tag" : ReadField(&in, tag, &out, result);
    if (!bad.has_value()) continue;
    *result = file.GetErrno() != 0
                  ? Outcome(LoadOutcome::kUnreadable, path,
                            absl::StrCat("read: ", ErrnoText(file.GetErrno())))
                  : Outcome(LoadOutcome::kCorrupt, path,
                            absl::StrCat(*bad, " (record ", out.records, ")"));
    return;
  }
  result->outcome = LoadOutcome::kLoaded;
  result->records = out.records;
  result->pauses = out.pauses;
  result->disabled = out.disabled_count;
  result->message = absl::StrCat("state file ", path, ": ", out.records,
                                 " endpoint records, ", out.pauses, " pauses, ",
                                 out.disabled_count, " disabled");
}

}  // namespace

const char* LoadOutcomeName(LoadOutcome o) {
  switch (o) {
    case LoadOutcome::kLoaded: return "loaded";
    case LoadOutcome::kMissing: return "missing";
    case LoadOutcome::kUnreadable: return "unreadable";
    case LoadOutcome::kTruncated: return "truncated";
    case LoadOutcome::kCorrupt: return "corrupt";
    case LoadOutcome::kIncompatibleVersion: return "incompatible_version";
  }
  return "unknown";
}

LoadResult LoadSnapshot(const std::string& path, RecordSink sink) {
  return LoadSnapshot(path, sink, [](const v1::state::Pause&) {});
}

LoadResult LoadSnapshot(const std::string& path, RecordSink sink,
                        PauseSink pause_sink) {
  return LoadSnapshot(path, sink, pause_sink,
                      [](const v1::state::Disabled&) {});
}

LoadResult LoadSnapshot(const std::string& path, RecordSink sink,
                        PauseSink pause_sink, DisabledSink disabled_sink) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Outcome(err == ENOENT ? LoadOutcome::kMissing
                                 : LoadOutcome::kUnreadable,
                   path, absl::StrCat("open: ", ErrnoText(err)));
  }
  FdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return Outcome(LoadOutcome::kUnreadable, path,
                   absl::StrCat("stat: ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Outcome(LoadOutcome::kUnreadable, path, "not a regular file");
  }
  if (st.st_size == 0) {
    return Outcome(LoadOutcome::kTruncated, path, "empty file");
  }
  Frame frame;
  if (auto bad = CheckFrame(fd, st.st_size, path, &frame)) return *bad;
  if (auto bad = CheckCrc(fd, frame, path)) return *bad;
  LoadResult checked;
  ParsePayload(fd, frame, path, nullptr, nullptr, nullptr, &checked);
  if (checked.outcome != LoadOutcome::kLoaded) return checked;
  LoadResult result;
  ParsePayload(fd, frame, path, &sink, &pause_sink, &disabled_sink, &result);
  return result;
}

// ---------------------------------------------------------------------------

SnapshotWriter::SnapshotWriter(std::string path, std::string tmp_path, int fd)
    : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {}

SnapshotWriter::~SnapshotWriter() {
  if (fd_ >= 0) {
    close(fd_);
    unlink(tmp_path_.c_str());
  }
}

absl::StatusOr<std::unique_ptr<SnapshotWriter>> SnapshotWriter::Begin(
    const std::string& path, int64_t written_unix_nanos,
    const std::string& writer) {
  std::string tmp = path + ".tmp";
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "state file ", path, ": create ", tmp, ": ", ErrnoText(errno)));
  }
  std::unique_ptr<SnapshotWriter> w(
      new SnapshotWriter(path, std::move(tmp), fd));
  w->buffer_.reserve(kBufferBytes + 4096);
  uint8_t* p = w->Extend(kSnapshotHeaderBytes);
  p = CodedOutputStream::WriteRawToArray(kMagic.data(), kMagic.size(), p);
  p = CodedOutputStream::WriteLittleEndian32ToArray(kSnapshotFormatVersion, p);
  CodedOutputStream::WriteLittleEndian32ToArray(0, p);
  const uint32_t tag =
      WireFormatLite::MakeTag(kWrittenField, WireFormatLite::WIRETYPE_VARINT);
  const uint64_t written = static_cast<uint64_t>(written_unix_nanos);
  const size_t from = w->buffer_.size();
  p = w->Extend(CodedOutputStream::VarintSize32(tag) +
                CodedOutputStream::VarintSize64(written));
  CodedOutputStream::WriteVarint64ToArray(
      written, CodedOutputStream::WriteTagToArray(tag, p));
  if (absl::Status s = w->EndPayload(from); !s.ok()) return s;
  absl::Status s = w->AddLengthDelimited(
      kWriterField, "the writer's name", writer.size(), [&](uint8_t* body) {
        CodedOutputStream::WriteStringToArray(writer, body);
      });
  if (!s.ok()) return s;
  return w;
}

uint8_t* SnapshotWriter::Extend(size_t n) {
  const size_t at = buffer_.size();
  buffer_.resize(at + n);
  return reinterpret_cast<uint8_t*>(&buffer_[at]);
}

absl::Status SnapshotWriter::EndPayload(size_t from) {
  const absl::string_view added = absl::string_view(buffer_).substr(from);
  crc_ = Crc32cExtend(crc_, added);
  payload_bytes_ += static_cast<int64_t>(added.size());
  return buffer_.size() >= kBufferBytes ? Flush() : absl::OkStatus();
}

absl::Status SnapshotWriter::AddLengthDelimited(
    int field, absl::string_view what, size_t size,
    absl::FunctionRef<void(uint8_t*)> body) {
  if (fd_ < 0) return absl::FailedPreconditionError("snapshot already ended");
  if (size > kMaxRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("state file ", path_, ": ", what, " of ", size,
                     " bytes, over the ", kMaxRecordBytes,
                     "-byte limit of one record"));
  }
  const uint32_t tag = WireFormatLite::MakeTag(
      field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  const uint32_t length = static_cast<uint32_t>(size);
  const size_t from = buffer_.size();
  uint8_t* p = Extend(CodedOutputStream::VarintSize32(tag) +
                      CodedOutputStream::VarintSize32(length) + size);
  body(CodedOutputStream::WriteVarint32ToArray(
      length, CodedOutputStream::WriteTagToArray(tag, p)));
  return EndPayload(from);
}

absl::Status SnapshotWriter::Add(const v1::state::Endpoint& record) {
  absl::Status s = AddLengthDelimited(
      kEndpointsField, "an endpoint record", record.ByteSizeLong(),
      [&](uint8_t* body) { record.SerializeWithCachedSizesToArray(body); });
  if (s.ok()) ++records_;
  return s;
}

absl::Status SnapshotWriter::AddPause(const v1::state::Pause& pause) {
  return AddLengthDelimited(
      kPausesField, "a pause", pause.ByteSizeLong(),
      [&](uint8_t* body) { pause.SerializeWithCachedSizesToArray(body); });
}

absl::Status SnapshotWriter::AddDisabled(const v1::state::Disabled& disabled) {
  return AddLengthDelimited(
      kDisabledField, "a disabled endpoint", disabled.ByteSizeLong(),
      [&](uint8_t* body) { disabled.SerializeWithCachedSizesToArray(body); });
}

absl::Status SnapshotWriter::Flush() {
  const char* p = buffer_.data();
  size_t n = buffer_.size();
  while (n > 0) {
    const ssize_t w = write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Fail("write", errno);
    p += w;
    n -= static_cast<size_t>(w);
    written_ += w;
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status SnapshotWriter::Fail(const std::string& step, int err) {
  close(fd_);
  fd_ = -1;
  unlink(tmp_path_.c_str());
  return absl::UnavailableError(absl::StrCat("state file ", path_, ": ", step,
                                             ": ", ErrnoText(err)));
}

absl::Status SnapshotWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError("snapshot already ended");
  uint8_t* p = Extend(kSnapshotTrailerBytes);
  p = CodedOutputStream::WriteLittleEndian64ToArray(
      static_cast<uint64_t>(payload_bytes_), p);
  p = CodedOutputStream::WriteLittleEndian32ToArray(crc_, p);
  CodedOutputStream::WriteRawToArray(kEndMagic.data(), kEndMagic.size(), p);
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (fsync(fd_) != 0) return Fail("fsync", errno);
  if (close(fd_) != 0) {
    fd_ = -1;  // closed either way (close(2))
    unlink(tmp_path_.c_str());
    return absl::UnavailableError(absl::StrCat(
        "state file ", path_, ": close: ", ErrnoText(errno)));
  }
  fd_ = -1;
  if (rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    unlink(tmp_path_.c_str());
    return absl::UnavailableError(absl::StrCat(
        "state file ", path_, ": rename: ", ErrnoText(err)));
  }
  // The rename is durable once the directory is.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path_.substr(0, slash);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    const int err = errno;
    if (dfd >= 0) close(dfd);
    return absl::UnavailableError(absl::StrCat(
        "state file ", path_, ": fsync of ", dir, ": ", ErrnoText(err)));
  }
  close(dfd);
  return absl::OkStatus();
}

}  // namespace stagger::state
