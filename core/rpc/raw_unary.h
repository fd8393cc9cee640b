// RawUnary: how Stagger's services answer a unary call whose method is
// registered raw (request and response as bytes), so that bytes that are
// not a valid message are answered INVALID_ARGUMENT naming the message type
// (with typed callback methods gRPC 1.51 answers them UNIMPLEMENTED with an
// empty message, which tells a client author nothing). staggerd's
// coordinator service and stagger-agent serve stagger.v1.RetryCoordinator
// through it, so a worker gets the same errors from both.
//
// ServeRaw parses `req` into a Request on one protobuf arena per call, runs
// logic(request, &response) -> grpc::Status, serializes the response if
// OK, and finishes the call inline. A handler that must look at the
// request before it knows how to answer (a waiting Admit may be held)
// parses it once itself (ParseRequest) and answers with FinishWithResponse:
// the hot path parses each request once. Stateless; thread-safe.
#ifndef STAGGER_CORE_RPC_RAW_UNARY_H_
#define STAGGER_CORE_RPC_RAW_UNARY_H_

#include <atomic>
#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace stagger::rpc {

// absl -> gRPC status, same code and message.
inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// INVALID_ARGUMENT "request: N bytes that are not a valid <type> (...)".
grpc::Status UnparsableRequest(size_t bytes, absl::string_view type);

// One arena per call: a unary call fits in its first block, a batch of 100
// in a few.
google::protobuf::ArenaOptions CallArenaOptions();

// Tests: told the type of every request ParseRequest parses (they count
// parses per call). Set while no call is served; null (the default):
// nothing is told, at the cost of one relaxed load per parse.
using ParseObserver = void (*)(absl::string_view type);
inline std::atomic<ParseObserver> parse_observer{nullptr};

// False if `bytes` are not a valid `Request`.
template <typename Request>
bool ParseRequest(const grpc::ByteBuffer& bytes, Request* req) {
  if (ParseObserver o = parse_observer.load(std::memory_order_relaxed)) {
    o(Request::descriptor()->full_name());
  }
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader consumes it
  grpc::ProtoBufferReader reader(&copy);
  return req->ParseFromZeroCopyStream(&reader) && reader.status().ok();
}

inline grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx,
                                            const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// Finishes the call: `req` is not a valid Request.
template <typename Request>
grpc::ServerUnaryReactor* FinishUnparsable(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer& req) {
  return FinishWith(ctx, UnparsableRequest(req.Length(),
                                           Request::descriptor()->full_name()));
}

// Finishes the call with `status`, and `response` as its bytes if OK.
template <typename Response>
grpc::ServerUnaryReactor* FinishWithResponse(grpc::CallbackServerContext* ctx,
                                             grpc::Status status,
                                             const Response& response,
                                             grpc::ByteBuffer* resp) {
  if (status.ok()) {
    bool own_buffer = false;
    status = grpc::SerializationTraits<Response>::Serialize(response, resp,
                                                            &own_buffer);
  }
  return FinishWith(ctx, status);
}

template <typename Request, typename Response, typename Logic>
grpc::ServerUnaryReactor* ServeRaw(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* req,
                                   grpc::ByteBuffer* resp, Logic logic) {
  google::protobuf::Arena arena(CallArenaOptions());
  Request* request = google::protobuf::Arena::CreateMessage<Request>(&arena);
  if (!ParseRequest(*req, request)) return FinishUnparsable<Request>(ctx, *req);
  Response* response = google::protobuf::Arena::CreateMessage<Response>(&arena);
  const grpc::Status status = logic(*request, response);
  return FinishWithResponse(ctx, status, *response, resp);
}

}  // namespace stagger::rpc

#endif  // STAGGER_CORE_RPC_RAW_UNARY_H_
