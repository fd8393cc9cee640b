// The state file's framing: a written snapshot loads back record for
// record; and every way a file can be wrong gives its own outcome with a
// message, never a crash, and delivers no record at all: missing,
// unreadable, empty, cut at every length, garbage, a flipped byte, another
// format version, a trailer that disagrees, a record that does not parse
// under a good CRC, each malformed field with its own message. Writes are
// atomic: an abandoned write leaves the old file as it was. The format is
// held to the file commit e504113's writer made (golden_snapshot.h): it
// loads to exactly its records, and today's writer makes it byte for byte.
#include "server/state/snapshot_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/state/crc32c.h"
#include "tests/state/golden_snapshot.h"
#include "tests/testing/files.h"

namespace stagger::state {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using v1::state::Endpoint;

const std::string kGoldenFile =
    std::string(STAGGER_STATE_TESTDATA) + "/golden-e504113.snap";

class SnapshotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    path_ = dir_ / "state.snap";
  }

  static Endpoint Record(int i) {
    Endpoint e;
    e.set_key(absl::StrCat("https://hooks.example/", i));
    e.set_last_seen_unix_nanos(1'700'000'000'000'000'000 + i);
    e.set_retry_after_until_unix_nanos(1'700'000'030'000'000'000);
    e.mutable_breaker()->set_state(v1::OPEN);
    e.mutable_breaker()->set_open_until_unix_nanos(1'700'000'001'000'000'000);
    e.mutable_breaker()->set_trips(3);
    return e;
  }
  void Write(int n) {
    auto w = SnapshotWriter::Begin(path_, 1'700'000'000'123'456'789, "test");
    ASSERT_TRUE(w.ok()) << w.status();
    for (int i = 0; i < n; ++i) ASSERT_TRUE((*w)->Add(Record(i)).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  std::string Bytes() const { return ::stagger::testing::ReadFile(path_); }
  void Put(const std::string& bytes) const {
    ASSERT_TRUE(::stagger::testing::WriteFile(path_, bytes)) << path_;
  }
  // Loads; checks that no record reached the sink unless loaded.
  LoadResult Load() {
    loaded_.clear();
    LoadResult r = LoadSnapshot(path_, [&](const Endpoint& e) {
      loaded_.push_back(e);
    });
    if (r.outcome != LoadOutcome::kLoaded) {
      EXPECT_TRUE(loaded_.empty()) << "records delivered from a bad file";
    }
    EXPECT_FALSE(r.message.empty());
    return r;
  }
  // A file with a correct header, CRC and trailer around `payload`.
  static std::string Framed(const std::string& payload, uint32_t version = 1) {
    std::string f("\x89STGSNAP", 8);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<char>(version >> (8 * i)));
    f.append(4, '\0');
    f += payload;
    const uint64_t n = payload.size();
    for (int i = 0; i < 8; ++i) f.push_back(static_cast<char>(n >> (8 * i)));
    const uint32_t crc = Crc32c(payload);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<char>(crc >> (8 * i)));
    return f + "SNAP";
  }

  ::stagger::testing::ScratchDir dir_;
  std::string path_;
  std::vector<Endpoint> loaded_;
};

TEST_F(SnapshotFileTest, WrittenRecordsLoadBackInOrder) {
  Write(3);
  const LoadResult r = Load();
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  EXPECT_EQ(r.records, 3);
  EXPECT_EQ(r.writer, "test");
  EXPECT_EQ(r.written_unix_nanos, 1'700'000'000'123'456'789);
  ASSERT_EQ(loaded_.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(loaded_[i].SerializeAsString(), Record(i).SerializeAsString());
  }
  EXPECT_NE(access((path_ + ".tmp").c_str(), F_OK), 0) << "temp file left";
}

TEST_F(SnapshotFileTest, PausesLoadBackBeforeTheEndpointsAndAreCounted) {
  v1::state::Pause pause;
  pause.set_target("https://partner.example/");
  pause.set_prefix(true);
  pause.set_since_unix_nanos(1'700'000'000'000'000'000);
  pause.set_until_unix_nanos(1'700'007'200'000'000'000);
  pause.set_reason("partner maintenance");
  pause.set_paused_by("spiffe://ops/alice");
  {
    auto w = SnapshotWriter::Begin(path_, 1'700'000'000'123'456'789, "test");
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->AddPause(pause).ok());
    ASSERT_TRUE((*w)->Add(Record(0)).ok());
    EXPECT_EQ((*w)->records(), 1) << "a pause is not an endpoint record";
    ASSERT_TRUE((*w)->Commit().ok());
  }
  std::vector<std::string> order;
  std::vector<v1::state::Pause> pauses;
  const LoadResult r = LoadSnapshot(
      path_, [&](const Endpoint& e) { order.push_back(e.key()); },
      [&](const v1::state::Pause& p) {
        order.push_back("pause");
        pauses.push_back(p);
      });
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  EXPECT_EQ(r.records, 1);
  EXPECT_EQ(r.pauses, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"pause", Record(0).key()}));
  ASSERT_EQ(pauses.size(), 1u);
  EXPECT_EQ(pauses[0].SerializeAsString(), pause.SerializeAsString());
  // The endpoint-only reader skips the pause.
  EXPECT_EQ(Load().records, 1);
  EXPECT_EQ(loaded_.size(), 1u);
}

TEST_F(SnapshotFileTest, UnparsablePauseUnderAGoodCrcIsCorrupt) {
  // Field 14 (pauses), length 2, bytes that are not a Pause (a truncated
  // varint field).
  Put(Framed(std::string("\x72\x02\x08\x80", 4)));
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt);
  EXPECT_NE(r.message.find("unparsable pause"), std::string::npos) << r.message;
}

TEST_F(SnapshotFileTest, ManyRecordsCrossTheWriteBuffer) {
  Write(30000);  // ~2.5 MB: several 1 MiB flushes
  const LoadResult r = Load();
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  ASSERT_EQ(loaded_.size(), 30000u);
  EXPECT_EQ(loaded_[29999].key(), "https://hooks.example/29999");
}

TEST_F(SnapshotFileTest, NoRecordsIsAValidSnapshot) {
  Write(0);
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  EXPECT_EQ(r.records, 0);
}

TEST_F(SnapshotFileTest, Missing) {
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kMissing);
  EXPECT_NE(r.message.find(path_), std::string::npos) << r.message;
}

TEST_F(SnapshotFileTest, UnreadableWhenADirectory) {
  ASSERT_EQ(mkdir(path_.c_str(), 0755), 0);
  EXPECT_EQ(Load().outcome, LoadOutcome::kUnreadable);
}

TEST_F(SnapshotFileTest, EmptyFileIsTruncated) {
  Put("");
  EXPECT_EQ(Load().outcome, LoadOutcome::kTruncated);
}

TEST_F(SnapshotFileTest, CutAtEveryLengthIsTruncated) {
  Write(4);
  const std::string whole = Bytes();
  for (size_t n = 0; n < whole.size(); ++n) {
    Put(whole.substr(0, n));
    const LoadResult r = Load();
    EXPECT_EQ(r.outcome, LoadOutcome::kTruncated)
        << "cut at " << n << " of " << whole.size() << ": " << r.message;
  }
}

TEST_F(SnapshotFileTest, GarbageIsCorrupt) {
  Put("default_policy { backoff { max_attempts: 3 } }\n");
  LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt);
  EXPECT_NE(r.message.find("not a Stagger snapshot"), std::string::npos)
      << r.message;
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>(i * 131 + 7));
  Put(noise);
  EXPECT_EQ(Load().outcome, LoadOutcome::kCorrupt);
}

TEST_F(SnapshotFileTest, AFlippedPayloadByteFailsTheCrc) {
  Write(4);
  std::string bytes = Bytes();
  bytes[kSnapshotHeaderBytes + 30] ^= 0x20;
  Put(bytes);
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt);
  EXPECT_NE(r.message.find("CRC-32C mismatch"), std::string::npos) << r.message;
}

TEST_F(SnapshotFileTest, AnotherFormatVersionIsIncompatible) {
  Write(2);
  std::string bytes = Bytes();
  bytes[8] = 2;
  Put(bytes);
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kIncompatibleVersion);
  EXPECT_NE(r.message.find("format version 2"), std::string::npos) << r.message;
}

TEST_F(SnapshotFileTest, TrailerLengthDisagreeingWithTheFileIsCorrupt) {
  Write(2);
  std::string bytes = Bytes();
  bytes.insert(kSnapshotHeaderBytes, "xx");
  Put(bytes);
  EXPECT_EQ(Load().outcome, LoadOutcome::kCorrupt);
}

TEST_F(SnapshotFileTest, UnparsableRecordUnderAGoodCrcIsCorrupt) {
  // Field 15 (an endpoint), 3 bytes that are not an Endpoint message; the
  // record before it is good, and must not be delivered either.
  std::string good;
  Record(1).AppendToString(&good);
  std::string payload = "\x7a";
  payload.push_back(static_cast<char>(good.size()));
  payload += good;
  payload += std::string("\x7a\x03\xff\xff\xff", 5);
  Put(Framed(payload));
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt) << r.message;
  EXPECT_NE(r.message.find("unparsable endpoint"), std::string::npos)
      << r.message;
}

TEST_F(SnapshotFileTest, OversizedFieldIsCorrupt) {
  // Field 15 claiming 2 MiB (varint 0x80 0x80 0x80 0x01).
  Put(Framed(std::string("\x7a\x80\x80\x80\x01", 5)));
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt);
  EXPECT_NE(r.message.find("limit"), std::string::npos) << r.message;
}

TEST_F(SnapshotFileTest, FieldsOfANewerWriterAreSkipped) {
  // Field 3 (varint) and field 4 (bytes) are unknown to this reader.
  std::string rec;
  Record(7).AppendToString(&rec);
  std::string payload = std::string("\x18\x2a\x22\x03" "abc", 7);
  payload += "\x7a";
  payload.push_back(static_cast<char>(rec.size()));
  payload += rec;
  Put(Framed(payload));
  const LoadResult r = Load();
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  ASSERT_EQ(loaded_.size(), 1u);
  EXPECT_EQ(loaded_[0].key(), "https://hooks.example/7");
}

TEST_F(SnapshotFileTest, AnAbandonedWriteLeavesTheOldFile) {
  Write(2);
  const std::string before = Bytes();
  {
    auto w = SnapshotWriter::Begin(path_, 1, "abandoned");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(Record(9)).ok());
  }  // destroyed without Commit
  EXPECT_EQ(Bytes(), before);
  EXPECT_NE(access((path_ + ".tmp").c_str(), F_OK), 0) << "temp file left";
  Write(5);
  EXPECT_EQ(Load().records, 5);
}

// --- The format, held to commit e504113's writer --------------------------

TEST_F(SnapshotFileTest, TheGoldenFileOfE504113LoadsToItsRecords) {
  std::vector<v1::state::Pause> pauses;
  const LoadResult r = LoadSnapshot(
      kGoldenFile, [&](const Endpoint& e) { loaded_.push_back(e); },
      [&](const v1::state::Pause& p) { pauses.push_back(p); });
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  EXPECT_EQ(r.written_unix_nanos, testing::kGoldenWrittenUnixNanos);
  EXPECT_EQ(r.writer, testing::kGoldenWriter);
  const std::vector<v1::state::Pause> want_pauses = testing::GoldenPauses();
  const std::vector<Endpoint> want = testing::GoldenEndpoints();
  EXPECT_EQ(r.pauses, static_cast<int64_t>(want_pauses.size()));
  EXPECT_EQ(r.records, static_cast<int64_t>(want.size()));
  ASSERT_EQ(pauses.size(), want_pauses.size());
  for (size_t i = 0; i < pauses.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(pauses[i], want_pauses[i]))
        << "pause " << i << ":\n" << pauses[i].DebugString();
  }
  ASSERT_EQ(loaded_.size(), want.size());
  for (size_t i = 0; i < loaded_.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(loaded_[i], want[i]))
        << "endpoint " << i << ":\n" << loaded_[i].DebugString();
  }
}

TEST_F(SnapshotFileTest, TodaysWriterWritesTheGoldenFileByteForByte) {
  const std::string golden = ::stagger::testing::ReadFile(kGoldenFile);
  ASSERT_GT(golden.size(), 4096u) << "testdata missing: " << kGoldenFile;
  ASSERT_TRUE(testing::WriteGoldenSnapshot(path_).ok());
  const std::string today = Bytes();
  ASSERT_EQ(today.size(), golden.size());
  for (size_t i = 0; i < today.size(); ++i) {
    ASSERT_EQ(today[i], golden[i]) << "first difference at byte " << i;
  }
}

// --- Malformed fields under a good CRC: each says what was wrong ----------

struct BadPayloadCase {
  const char* name;
  std::string payload;
  std::string want;  // the message after "corrupt: "
};

class BadPayloadTest : public SnapshotFileTest,
                       public ::testing::WithParamInterface<BadPayloadCase> {};

TEST_P(BadPayloadTest, IsCorruptAndSaysWhy) {
  Put(Framed(GetParam().payload));
  const LoadResult r = Load();
  EXPECT_EQ(r.outcome, LoadOutcome::kCorrupt) << r.message;
  EXPECT_THAT(r.message, HasSubstr("corrupt: " + GetParam().want));
}

// An endpoint record (field 15) that parses, as a payload prefix.
std::string GoodRecordField() {
  Endpoint e;
  e.set_key("k");
  const std::string rec = e.SerializeAsString();
  return std::string("\x7a", 1) + static_cast<char>(rec.size()) + rec;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadPayloadTest,
    ::testing::ValuesIn(std::vector<BadPayloadCase>{
        // Field number 0 is not a protobuf field.
        {"ZeroTag", std::string("\x00\x01", 2), "bad field tag (record 0)"},
        {"TagOverTenBytes", std::string(11, '\xff'),
         "bad field tag (record 0)"},
        {"CutVarint", "\x08\xff", "bad varint (record 0)"},
        {"CutFixed64", "\x09\x01\x02", "cut field (record 0)"},
        {"CutFixed32", "\x0d\x01", "cut field (record 0)"},
        {"CutLength", "\x7a\xff", "bad length (record 0)"},
        {"CutEndpoint", "\x7a\x05\x0a\x01", "cut field (record 0)"},
        {"CutUnknownField", "\x22\x05" "ab", "cut field (record 0)"},
        {"UnknownFieldOverTheLimit", "\x22\x80\x80\x80\x01",
         "a field of 2097152 bytes, over the 1048576-byte limit (record 0)"},
        {"LengthOver32Bits", "\x7a\x81\x80\x80\x80\x10",
         "a field of 4294967297 bytes, over the 1048576-byte limit (record "
         "0)"},
        {"StartGroup", "\x0b", "wire type 3 of field 1 (record 0)"},
        {"WireType7AfterARecord", GoodRecordField() + "\x7f",
         "wire type 7 of field 15 (record 1)"},
    }),
    [](const ::testing::TestParamInfo<BadPayloadCase>& info) {
      return std::string(info.param.name);
    });

TEST_F(SnapshotFileTest, TheWriterRefusesARecordTheReaderWouldRefuse) {
  auto w = SnapshotWriter::Begin(path_, 1, "test");
  ASSERT_TRUE(w.ok()) << w.status();
  v1::state::Pause big;
  big.set_target("https://x/");
  big.set_reason(std::string(kMaxRecordBytes, 'r'));
  const absl::Status s = (*w)->AddPause(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("a pause of " + std::to_string(big.ByteSizeLong()) +
                        " bytes, over the 1048576-byte limit"));
  // Nothing of it was written: the snapshot goes on and loads.
  ASSERT_TRUE((*w)->Add(Record(1)).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  const LoadResult r = Load();
  ASSERT_EQ(r.outcome, LoadOutcome::kLoaded) << r.message;
  EXPECT_EQ(r.records, 1);
  EXPECT_EQ(r.pauses, 0);
}

TEST_F(SnapshotFileTest, AWriterNameOverTheLimitIsRefused) {
  auto w = SnapshotWriter::Begin(path_, 1, std::string(kMaxRecordBytes + 1, 'w'));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("the writer's name of 1048577 bytes"));
}

TEST_F(SnapshotFileTest, WriterInAMissingFolderSaysWhere) {
  path_ = dir_ / "no/such/folder/state.snap";
  auto w = SnapshotWriter::Begin(path_, 1, "x");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(path_), std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace stagger::state
