// Crc32c: CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and LevelDB use),
// computed a byte at a time from a 1 KiB table: about 0.5 GB/s, enough to
// check a state file of a million endpoints (~100 MB) at start-up. The
// snapshot file's trailer carries it (proto/stagger/v1/snapshot.proto).
//   uint32_t crc = 0;
//   crc = Crc32cExtend(crc, part1); crc = Crc32cExtend(crc, part2);
// equals Crc32c(part1 + part2). Crc32c("123456789") == 0xE3069283.
#ifndef STAGGER_SERVER_STATE_CRC32C_H_
#define STAGGER_SERVER_STATE_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace stagger::state {

// The CRC of everything before `data` (0 for none) extended by `data`.
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }

}  // namespace stagger::state

#endif  // STAGGER_SERVER_STATE_CRC32C_H_
