#include "server/service/watch_events.h"

#include "server/service/proto_convert.h"

namespace stagger::service {
namespace {

v1::WatchEvent Event(const engine::ConditionChange& c, v1::EventKind kind) {
  v1::WatchEvent e;
  e.set_kind(kind);
  e.set_endpoint(std::string(c.endpoint));
  e.set_forgotten(c.forgotten);
  return e;
}

void BreakerEvents(const engine::ConditionChange& c,
                   std::vector<v1::WatchEvent>* out) {
  if (c.from.breaker == c.to.breaker) return;
  switch (c.to.breaker) {
    case engine::BreakerState::kOpen: {
      v1::WatchEvent e = Event(c, v1::EVENT_BREAKER_OPENED);
      e.set_open_cause(static_cast<v1::OpenCause>(c.open_cause));
      if (c.open_until != absl::InfinitePast()) {
        ToProto(c.open_until, e.mutable_open_until());
      }
      out->push_back(std::move(e));
      return;
    }
    case engine::BreakerState::kHalfOpen:
      out->push_back(Event(c, v1::EVENT_BREAKER_HALF_OPEN));
      return;
    case engine::BreakerState::kClosed:
      out->push_back(Event(c, v1::EVENT_BREAKER_CLOSED));
      return;
  }
}

void WindowAndReleaseEvents(const engine::ConditionChange& c,
                            std::vector<v1::WatchEvent>* out) {
  if (c.from.retry_after != c.to.retry_after) {
    v1::WatchEvent e = Event(c, c.to.retry_after ? v1::EVENT_RETRY_AFTER_SET
                                                  : v1::EVENT_RETRY_AFTER_ENDED);
    if (c.to.retry_after) {
      ToProto(c.retry_after_until, e.mutable_retry_after_until());
    }
    out->push_back(std::move(e));
  }
  if (c.from.releasing != c.to.releasing) {
    v1::WatchEvent e = Event(c, c.to.releasing ? v1::EVENT_RELEASE_STARTED
                                                : v1::EVENT_RELEASE_FINISHED);
    e.set_release_pace(c.release_pace);
    out->push_back(std::move(e));
  }
}

void DisableEvents(const engine::ConditionChange& c,
                   std::vector<v1::WatchEvent>* out) {
  if (c.from.disabled == c.to.disabled) return;
  if (c.to.disabled) {
    v1::WatchEvent e = Event(c, v1::EVENT_DISABLED);
    if (c.disabled != nullptr) {
      ToProto(*c.disabled, e.mutable_disabled());
      e.set_by(c.disabled->by);
      e.set_operation_id(c.disabled->operation_id);
    }
    out->push_back(std::move(e));
    return;
  }
  v1::WatchEvent e = Event(c, v1::EVENT_ENABLED);
  if (c.enabled != nullptr) {
    e.set_by(c.enabled->by);
    e.set_operation_id(c.enabled->operation_id);
  }
  out->push_back(std::move(e));
}

}  // namespace

std::vector<v1::WatchEvent> EventsOf(const engine::ConditionChange& c) {
  std::vector<v1::WatchEvent> out;
  BreakerEvents(c, &out);
  WindowAndReleaseEvents(c, &out);
  DisableEvents(c, &out);
  return out;
}

void ToProto(const engine::Pause& p, v1::Pause* out) {
  if (p.prefix) {
    out->mutable_target()->set_prefix(p.target);
  } else {
    out->mutable_target()->set_endpoint(p.target);
  }
  ToProto(p.since, out->mutable_since());
  ToProto(p.until, out->mutable_until());
  out->set_reason(p.reason);
  out->set_paused_by(p.paused_by);
  out->set_pause_id(p.id);
}

v1::WatchEvent PauseEvent(const engine::Pause& p, PauseChange change) {
  v1::WatchEvent e;
  e.set_kind(change == PauseChange::kPaused ? v1::EVENT_PAUSED
                                            : v1::EVENT_RESUMED);
  if (!p.prefix) e.set_endpoint(p.target);
  ToProto(p, e.mutable_pause());
  e.set_operation_id(p.id);
  switch (change) {
    case PauseChange::kPaused:
      e.set_by(p.paused_by);
      break;
    case PauseChange::kResumed:
      e.set_by(p.ended_by);
      break;
    case PauseChange::kRanOut:
      e.set_ran_out(true);
      break;
  }
  return e;
}

}  // namespace stagger::service
