#include "server/state/snapshot_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/state/crc32c.h"

namespace stagger::state {
namespace {

constexpr absl::string_view kMagic("\x89STGSNAP", 8);
constexpr absl::string_view kEndMagic("SNAP", 4);
constexpr size_t kBufferBytes = size_t{1} << 20;
// Snapshot's fields (snapshot.proto), as wire-format tags.
constexpr uint32_t kWrittenField = 1;
constexpr uint32_t kWriterField = 2;
constexpr uint32_t kPausesField = 14;
constexpr uint32_t kEndpointsField = 15;
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetLe(absl::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[i]);
  }
  return v;
}
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
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

// Buffered reads of the payload [begin, end) of an open file.
class PayloadReader {
 public:
  PayloadReader(int fd, int64_t begin, int64_t end)
      : fd_(fd), next_(begin), end_(end) {}

  bool AtEnd() const { return pos_ == buf_.size() && next_ == end_; }
  bool io_error() const { return io_error_; }

  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      char c;
      if (!ReadRaw(&c, 1)) return false;
      *v |= uint64_t{static_cast<unsigned char>(c) & 0x7fu} << shift;
      if ((static_cast<unsigned char>(c) & 0x80) == 0) return true;
    }
    return false;  // over 10 bytes: not a varint
  }
  bool ReadBytes(size_t n, std::string* out) {
    out->resize(n);
    return ReadRaw(out->data(), n);
  }
  bool Skip(uint64_t n) {
    while (n > 0) {
      if (pos_ == buf_.size() && !Fill()) return false;
      const size_t step = std::min<uint64_t>(n, buf_.size() - pos_);
      pos_ += step;
      n -= step;
    }
    return true;
  }

 private:
  bool ReadRaw(char* out, size_t n) {
    while (n > 0) {
      if (pos_ == buf_.size() && !Fill()) return false;
      const size_t step = std::min(n, buf_.size() - pos_);
      std::memcpy(out, buf_.data() + pos_, step);
      pos_ += step;
      out += step;
      n -= step;
    }
    return true;
  }
  bool Fill() {
    if (next_ >= end_) return false;
    const size_t n = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(kBufferBytes), end_ - next_));
    buf_.resize(n);
    if (!PreadAll(fd_, buf_.data(), n, next_)) {
      io_error_ = true;
      buf_.clear();
      pos_ = 0;
      return false;
    }
    next_ += static_cast<int64_t>(n);
    pos_ = 0;
    return true;
  }

  int fd_;
  int64_t next_;
  int64_t end_;
  std::string buf_;
  size_t pos_ = 0;
  bool io_error_ = false;
};

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
  const uint32_t version = static_cast<uint32_t>(GetLe(head.substr(8), 4));
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
  frame->payload_bytes = static_cast<int64_t>(GetLe(tail, 8));
  frame->crc = static_cast<uint32_t>(GetLe(tail.substr(8), 4));
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
  v1::state::Endpoint record;
  v1::state::Pause pause;
  int64_t records = 0;
  int64_t pauses = 0;

  // One known length-delimited field of the Snapshot, read whole: the
  // writer's name, a pause or an endpoint record, parsed and handed to its
  // sink. An error text if it does not parse.
  std::optional<std::string> Field(uint64_t field, const std::string& bytes,
                                   LoadResult* result) {
    if (field == kWriterField) {
      result->writer = bytes;
    } else if (field == kPausesField) {
      if (!pause.ParseFromString(bytes)) return "unparsable pause";
      ++pauses;
      if (pause_sink != nullptr) (*pause_sink)(pause);
    } else {
      if (!record.ParseFromString(bytes)) return "unparsable endpoint";
      ++records;
      if (sink != nullptr) (*sink)(record);
    }
    return std::nullopt;
  }
};

bool KnownLengthDelimited(uint64_t field) {
  return field == kEndpointsField || field == kPausesField ||
         field == kWriterField;
}

// One pass over the payload's fields. With null sinks it only checks that
// everything parses. Fills `result` (outcome kLoaded) or the failure.
void ParsePayload(int fd, const Frame& frame, const std::string& path,
                  const RecordSink* sink, const PauseSink* pause_sink,
                  LoadResult* result) {
  PayloadReader in(fd, kSnapshotHeaderBytes,
                   kSnapshotHeaderBytes + frame.payload_bytes);
  Delivery out;
  out.sink = sink;
  out.pause_sink = pause_sink;
  std::string bytes;
  auto fail = [&](const std::string& what) {
    *result = in.io_error()
                  ? Outcome(LoadOutcome::kUnreadable, path,
                            absl::StrCat("read: ", ErrnoText(errno)))
                  : Outcome(LoadOutcome::kCorrupt, path,
                            absl::StrCat(what, " (record ", out.records, ")"));
  };
  while (!in.AtEnd()) {
    uint64_t tag = 0, value = 0;
    if (!in.ReadVarint(&tag)) return fail("bad field tag");
    const int wire = static_cast<int>(tag & 7);
    const uint64_t field = tag >> 3;
    if (wire == kVarint) {
      if (!in.ReadVarint(&value)) return fail("bad varint");
      if (field == kWrittenField) {
        result->written_unix_nanos = static_cast<int64_t>(value);
      }
    } else if (wire == kFixed64 || wire == kFixed32) {
      if (!in.Skip(wire == kFixed64 ? 8 : 4)) return fail("cut field");
    } else if (wire == kLengthDelimited) {
      if (!in.ReadVarint(&value)) return fail("bad length");
      if (value > kMaxRecordBytes) {
        return fail(absl::StrCat("a field of ", value, " bytes, over the ",
                                 kMaxRecordBytes, "-byte limit"));
      }
      if (!KnownLengthDelimited(field)) {
        if (!in.Skip(value)) return fail("cut field");
      } else if (!in.ReadBytes(value, &bytes)) {
        return fail("cut field");
      } else if (auto bad = out.Field(field, bytes, result)) {
        return fail(*bad);
      }
    } else {
      return fail(absl::StrCat("wire type ", wire, " of field ", field));
    }
  }
  result->outcome = LoadOutcome::kLoaded;
  result->records = out.records;
  result->pauses = out.pauses;
  result->message = absl::StrCat("state file ", path, ": ", out.records,
                                 " endpoint records, ", out.pauses, " pauses");
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
  ParsePayload(fd, frame, path, nullptr, nullptr, &checked);
  if (checked.outcome != LoadOutcome::kLoaded) return checked;
  LoadResult result;
  ParsePayload(fd, frame, path, &sink, &pause_sink, &result);
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
  w->buffer_.append(kMagic.data(), kMagic.size());
  PutLe(&w->buffer_, kSnapshotFormatVersion, 4);
  PutLe(&w->buffer_, 0, 4);
  std::string fields;
  PutVarint(&fields, kWrittenField << 3 | kVarint);
  PutVarint(&fields, static_cast<uint64_t>(written_unix_nanos));
  PutVarint(&fields, kWriterField << 3 | kLengthDelimited);
  PutVarint(&fields, writer.size());
  fields += writer;
  if (absl::Status s = w->Payload(fields); !s.ok()) return s;
  return w;
}

absl::Status SnapshotWriter::Payload(const std::string& bytes) {
  crc_ = Crc32cExtend(crc_, bytes);
  payload_bytes_ += static_cast<int64_t>(bytes.size());
  buffer_ += bytes;
  return buffer_.size() >= kBufferBytes ? Flush() : absl::OkStatus();
}

absl::Status SnapshotWriter::AddField(
    uint32_t field, const google::protobuf::MessageLite& message) {
  if (fd_ < 0) return absl::FailedPreconditionError("snapshot already ended");
  scratch_.clear();
  PutVarint(&scratch_, field << 3 | kLengthDelimited);
  PutVarint(&scratch_, message.ByteSizeLong());
  if (!message.AppendToString(&scratch_)) {
    return absl::InternalError(
        absl::StrCat("cannot serialise a ", message.GetTypeName()));
  }
  return Payload(scratch_);
}

absl::Status SnapshotWriter::Add(const v1::state::Endpoint& record) {
  absl::Status s = AddField(kEndpointsField, record);
  if (s.ok()) ++records_;
  return s;
}

absl::Status SnapshotWriter::AddPause(const v1::state::Pause& pause) {
  return AddField(kPausesField, pause);
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
  PutLe(&buffer_, static_cast<uint64_t>(payload_bytes_), 8);
  PutLe(&buffer_, crc_, 4);
  buffer_.append(kEndMagic.data(), kEndMagic.size());
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
