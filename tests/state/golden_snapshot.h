// The golden snapshot: a known set of records, every field of
// snapshot.proto set somewhere (open, half-open and closed breakers with
// full windows, a budget window, served rates, every field of the release
// pace and queue, Retry-After windows, an exact and a prefix pause, a key
// at the 4096-byte key limit, UTF-8 keys, counters and instants at their
// type's extremes), and the file the state-file writer of commit e504113
// made of them: testdata/golden-e504113.snap.
//
// How that file was made (once; it is never rewritten): in a worktree of
// e504113, with this header, golden_snapshot.cc and
// write_golden_snapshot.cc copied into tests/state and an executable target
// for them added, `write_golden_snapshot tests/state/testdata/golden-e504113.snap`.
// snapshot_file_test loads it with today's reader and compares today's
// writer's output with it byte for byte.
#ifndef STAGGER_TESTS_STATE_GOLDEN_SNAPSHOT_H_
#define STAGGER_TESTS_STATE_GOLDEN_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "stagger/v1/snapshot.pb.h"

namespace stagger::state::testing {

// The snapshot's own fields (pinned: nothing depends on a clock).
inline constexpr int64_t kGoldenWrittenUnixNanos = 1'700'000'000'123'456'789;
inline constexpr char kGoldenWriter[] = "golden snapshot (tests/state)";

std::vector<v1::state::Pause> GoldenPauses();
std::vector<v1::state::Endpoint> GoldenEndpoints();

// Writes the golden snapshot to `path` with SnapshotWriter: its own fields,
// then the pauses, then the endpoints, as StateKeeper orders them.
absl::Status WriteGoldenSnapshot(const std::string& path);

}  // namespace stagger::state::testing

#endif  // STAGGER_TESTS_STATE_GOLDEN_SNAPSHOT_H_
