#include "core/rpc/raw_unary.h"

#include "absl/strings/str_cat.h"

namespace stagger::rpc {

grpc::Status UnparsableRequest(size_t bytes, absl::string_view type) {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrCat("request: ", bytes, " bytes that are not a valid ", type,
                   " (malformed protobuf, or a string field that is not "
                   "UTF-8)"));
}

google::protobuf::ArenaOptions CallArenaOptions() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = 4096;
  o.max_block_size = 65536;
  return o;
}

}  // namespace stagger::rpc
