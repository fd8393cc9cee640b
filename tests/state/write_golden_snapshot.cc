// write_golden_snapshot PATH: writes the golden snapshot (golden_snapshot.h)
// to PATH with the state-file writer it is built with. Run once, with the
// writer of commit e504113, to make testdata/golden-e504113.snap; see
// golden_snapshot.h.
#include <iostream>

#include "tests/state/golden_snapshot.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PATH\n";
    return 2;
  }
  const absl::Status s = stagger::state::testing::WriteGoldenSnapshot(argv[1]);
  if (!s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  return 0;
}
