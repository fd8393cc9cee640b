#include "core/engine/endpoint_state.h"

#include <cstring>
#include <new>

namespace stagger::engine {

EndpointState* EndpointState::New(absl::string_view key) {
  // key_head is the last member: the key's bytes past it go right after
  // the struct. No offsetof: the struct is not standard-layout.
  constexpr size_t kHead = sizeof(EndpointState::key_head);
  const size_t extra = key.size() > kHead ? key.size() - kHead : 0;
  void* raw = ::operator new(sizeof(EndpointState) + extra);
  auto* st = new (raw) EndpointState();
  st->key_size = static_cast<uint16_t>(key.size());
  std::memcpy(st->key_head, key.data(), key.size());
  return st;
}

void EndpointState::Delete(EndpointState* st) {
  st->~EndpointState();
  ::operator delete(st);
}

}  // namespace stagger::engine
