// ThreadSanitizer annotations for an uninstrumented gRPC (TSan builds only;
// sanitizers.cmake links this file into every executable).
//
// gRPC's contract for a completion-queue tag: everything the application
// wrote before handing the tag to gRPC (starting a batch, requesting a call)
// is visible to whoever gets the tag back (the callback run for it, or
// grpc_completion_queue_next/pluck). libgrpc keeps that promise through its
// lock-free queues and call combiners, which TSan cannot see, so every
// object handed over with a tag - callback tags, CallOpSets, messages - would
// be reported as a race between the thread that started the operation and
// the one that completes it. This file states the contract to TSan at
// libgrpc's three tag hand-over points, which every path goes through:
//   grpc_cq_begin_op(cq, tag)      the tag enters gRPC      -> release(tag)
//   grpc_cq_end_op(cq, tag, ...)   the operation is done    -> acquire and
//                                  (the callback may run     release(tag)
//                                  right inside it)
//   grpc_completion_queue_next/pluck  the tag comes back    -> acquire(tag)
// As in absl_tsan_annotations.cc, the executable defines these functions;
// the dynamic linker binds libgrpc's and libgrpc++'s own calls (all through
// the PLT) to them, and they call the real ones. grpc_cq_begin_op and
// grpc_cq_end_op are libgrpc's internal entry points (exported, not in its
// public headers), declared here with gRPC 1.51's signatures; a missing
// symbol aborts naming it.
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"

#if !defined(__has_feature) || !__has_feature(thread_sanitizer)
#error "grpc_tsan_annotations.cc is for -fsanitize=thread builds only"
#endif

struct grpc_cq_completion;

// gRPC 1.51, src/core/lib/surface/completion_queue.h.
bool grpc_cq_begin_op(grpc_completion_queue* cq, void* tag);
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage),
                    void* done_arg, grpc_cq_completion* storage,
                    bool internal);

namespace {

// The real function: the next definition of `self`'s symbol after this
// executable's, i.e. libgrpc's.
template <typename Fn>
Fn Real(Fn self) {
  Dl_info info;
  const char* name = nullptr;
  void* fn = nullptr;
  if (dladdr(reinterpret_cast<void*>(self), &info) != 0 &&
      info.dli_saddr == reinterpret_cast<void*>(self)) {
    name = info.dli_sname;
    if (name != nullptr) fn = dlsym(RTLD_NEXT, name);
  }
  if (fn == nullptr) {
    std::fprintf(stderr, "grpc_tsan_annotations: real %s not found\n",
                 name != nullptr ? name : "(unnamed)");
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

bool grpc_cq_begin_op(grpc_completion_queue* cq, void* tag) {
  static const auto real = Real(&grpc_cq_begin_op);
  __tsan_release(tag);
  return real(cq, tag);
}

void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage),
                    void* done_arg, grpc_cq_completion* storage,
                    bool internal) {
  static const auto real = Real(&grpc_cq_end_op);
  __tsan_acquire(tag);
  __tsan_release(tag);
  real(cq, tag, std::move(error), done, done_arg, storage, internal);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq,
                                      gpr_timespec deadline, void* reserved) {
  static const auto real = Real(&grpc_completion_queue_next);
  const grpc_event event = real(cq, deadline, reserved);
  if (event.type == GRPC_OP_COMPLETE) __tsan_acquire(event.tag);
  return event;
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                       gpr_timespec deadline, void* reserved) {
  static const auto real = Real(&grpc_completion_queue_pluck);
  const grpc_event event = real(cq, tag, deadline, reserved);
  if (event.type == GRPC_OP_COMPLETE) __tsan_acquire(event.tag);
  return event;
}
