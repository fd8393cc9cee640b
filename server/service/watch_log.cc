#include "server/service/watch_log.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"

namespace stagger::service {
namespace {

using google::protobuf::util::TimeUtil;

uint64_t RandomIncarnation() {
  absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen, 1, UINT64_MAX);
}

absl::Time AtOf(const v1::WatchEvent& e) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(e.at()));
}

}  // namespace

bool WatchLog::Filter::Matches(const v1::WatchEvent& e) const {
  if (kinds != 0 && (kinds & (uint32_t{1} << e.kind())) == 0) return false;
  if (prefix.empty()) return true;
  if (!e.endpoint().empty()) return absl::StartsWith(e.endpoint(), prefix);
  // A prefix pause: it overlaps the watched keys if one prefix starts
  // with the other.
  const std::string& target = e.pause().target().prefix();
  return absl::StartsWith(target, prefix) || absl::StartsWith(prefix, target);
}

WatchLog::WatchLog(Options options, const engine::Clock* clock)
    : replica_(std::move(options.replica)),
      incarnation_(options.incarnation != 0 ? options.incarnation
                                            : RandomIncarnation()),
      max_events_(static_cast<size_t>(options.max_events)),
      max_age_(options.max_age),
      clock_(clock) {}

absl::Status WatchLog::CheckOptions(const Options& o) {
  if (o.max_events < kMinMaxEvents || o.max_events > kMaxMaxEvents) {
    return absl::InvalidArgumentError(
        absl::StrCat("--watch_history_events: must be in [", kMinMaxEvents,
                     ", ", kMaxMaxEvents, "], got ", o.max_events));
  }
  if (o.max_age < kMinMaxAge || o.max_age > kMaxMaxAge) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--watch_history_age: must be in [", absl::FormatDuration(kMinMaxAge),
        ", ", absl::FormatDuration(kMaxMaxAge), "], got ",
        absl::FormatDuration(o.max_age)));
  }
  return absl::OkStatus();
}

void WatchLog::TrimLocked(absl::Time now) {
  const absl::Time cutoff = now - max_age_;
  while (!events_.empty() &&
         (events_.size() > max_events_ || AtOf(events_.front()) < cutoff)) {
    events_.pop_front();
    ++first_;
  }
}

uint64_t WatchLog::Append(v1::WatchEvent e) {
  const absl::Time now = clock_->Now();
  uint64_t seq;
  {
    absl::MutexLock l(&mu_);
    seq = first_ + events_.size();
    e.set_sequence(seq);
    *e.mutable_at() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now));
    events_.push_back(std::move(e));
    TrimLocked(now);
  }
  if (on_append_) on_append_();
  return seq;
}

WatchLog::Page WatchLog::Read(uint64_t from, const Filter& filter,
                              size_t max) {
  Page page;
  absl::MutexLock l(&mu_);
  TrimLocked(clock_->Now());
  const uint64_t end = first_ + events_.size();
  if (from == 0) from = 1;
  if (from > end) from = end;  // nothing numbered that high yet
  if (from < first_) {
    page.missed_from = from;
    page.missed_to = first_ - 1;
    from = first_;
  }
  size_t examined = 0;
  uint64_t seq = from;
  for (; seq < end && page.events.size() < max && examined < kMaxExamined;
       ++seq, ++examined) {
    const v1::WatchEvent& e = events_[seq - first_];
    if (!filter.Matches(e)) continue;
    page.events.push_back(e);
    page.events.back().set_replica(replica_);
    page.events.back().set_incarnation(incarnation_);
  }
  page.next = seq;
  return page;
}

bool WatchLog::WaitForNew(uint64_t seen, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  const uint64_t wakes = wakes_;
  auto ready = [this, seen, wakes]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return wakes_ != wakes || first_ + events_.size() > seen;
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  return first_ + events_.size() > seen;
}

void WatchLog::WakeWaiters() {
  absl::MutexLock l(&mu_);
  ++wakes_;
}

uint64_t WatchLog::next_sequence() const {
  absl::MutexLock l(&mu_);
  return first_ + events_.size();
}

uint64_t WatchLog::oldest() const {
  absl::MutexLock l(&mu_);
  return first_;
}

size_t WatchLog::size() const {
  absl::MutexLock l(&mu_);
  return events_.size();
}

std::string WatchLog::TokenFor(uint64_t next) const {
  return absl::StrFormat("%016x.%d", incarnation_, next);
}

absl::StatusOr<WatchLog::Position> WatchLog::ParseToken(
    absl::string_view token) {
  const size_t dot = token.find('.');
  Position p;
  if (token.size() > 40 || dot != 16 ||
      !absl::SimpleHexAtoi(token.substr(0, 16), &p.incarnation) ||
      !absl::SimpleAtoi(token.substr(17), &p.next) || p.next == 0) {
    return absl::InvalidArgumentError(
        "resume_token: not a token from a WatchResponse of this service");
  }
  return p;
}

}  // namespace stagger::service
