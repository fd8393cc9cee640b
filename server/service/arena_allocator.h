// ArenaMessageAllocator: request and response messages of a callback-API
// unary method allocated on one protobuf Arena per call, freed at once when
// the call ends. A batch request parses into ~2 heap allocations per item
// (the item and its key string) and its answer builds 2 more (the decision
// and its Duration); on an arena they are a few block allocations per call.
// The benchmark's no-op service (which finds this header with
// __has_include) installs it on its typed methods; staggerd's service
// registers its methods raw and parses onto an arena per call with the same
// block sizes (coordinator_service.cc), so both allocate alike.
// Thread-safe; must outlive the server.
#ifndef STAGGER_SERVER_SERVICE_ARENA_ALLOCATOR_H_
#define STAGGER_SERVER_SERVICE_ARENA_ALLOCATOR_H_

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace stagger::service {

template <typename Request, typename Response>
class ArenaMessageAllocator final
    : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder;
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options()) {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(
          google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options() {
      google::protobuf::ArenaOptions o;
      o.start_block_size = 4096;   // bytes: a unary call fits in one block
      o.max_block_size = 65536;    // bytes: a batch of 100 in a few
      return o;
    }
    google::protobuf::Arena arena_;
  };
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_ARENA_ALLOCATOR_H_
