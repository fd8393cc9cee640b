#include "bench/agent/delivery_worker.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/engine/decision.h"

namespace stagger::bench {

void WorkerStats::Merge(WorkerStats& o) {
  started += o.started;
  delivered += o.delivered;
  local_admits += o.local_admits;
  not_admitted += o.not_admitted;
  failed += o.failed;
  retried += o.retried;
  retry_deferred += o.retry_deferred;
  gave_up += o.gave_up;
  unfinished += o.unfinished;
  unexpected += o.unexpected;
  errors += o.errors;
  if (first_error.empty()) first_error = o.first_error;
  delivery.Merge(o.delivery);
  admit.Merge(o.admit);
  report.Merge(o.report);
  retry_wait.Merge(o.retry_wait);
  admits.insert(admits.end(), std::make_move_iterator(o.admits.begin()),
                std::make_move_iterator(o.admits.end()));
  failures.insert(failures.end(), std::make_move_iterator(o.failures.begin()),
                  std::make_move_iterator(o.failures.end()));
  o.admits.clear();
  o.failures.clear();
}

DeliveryWorker::DeliveryWorker(WorkerOptions options, const DriveClock* clock)
    : o_(std::move(options)),
      clock_(clock),
      next_key_(o_.first_key),
      rng_(WorkerSeed(o_.seed, static_cast<uint64_t>(o_.channel_index))) {}

bool DeliveryWorker::Connect(absl::Duration timeout) {
  grpc::ChannelArguments args;
  // A channel argument of its own and no shared subchannel pool: every
  // worker gets its own connection, as separate worker processes would.
  args.SetInt("stagger.agent_load.channel", o_.channel_index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      o_.target, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 absl::ToChronoNanoseconds(timeout))) {
    return false;
  }
  stub_ = v1::RetryCoordinator::NewStub(channel);
  return true;
}

void DeliveryWorker::Run() {
  const int64_t interval =
      o_.rate > 0 ? static_cast<int64_t>(1e9 / o_.rate) : 0;
  // Workers of one target start spread over one interval, not together.
  int64_t next = NowNs() + (interval * (o_.channel_index % 16)) / 16;
  while (true) {
    const int64_t now = NowNs();
    if (now >= clock_->end()) break;
    if (!retries_.empty() && retries_.top().due_ns <= now) {
      RetryNext();
      continue;
    }
    if (interval > 0 && next > now) {
      int64_t wake = std::min(next, clock_->end());
      if (!retries_.empty()) wake = std::min(wake, retries_.top().due_ns);
      SleepUntil(wake);
      continue;
    }
    if (interval > 0) next = std::max(next + interval, now - kMaxLagNs);
    Deliver(now);
  }
  // The deliveries started in the window end: their retries, when due.
  const int64_t drain_end = clock_->end() + kMaxDrainNs;
  while (!retries_.empty() && retries_.top().due_ns < drain_end) {
    SleepUntil(retries_.top().due_ns);
    RetryNext();
  }
  for (; !retries_.empty(); retries_.pop()) {
    if (retries_.top().measured) ++stats_.unfinished;
  }
}

void DeliveryWorker::SleepUntil(int64_t t) {
  const int64_t now = NowNs();
  if (t > now) absl::SleepFor(absl::Nanoseconds(t - now));
}

int DeliveryWorker::NextKey(int64_t now) {
  int first = 0, last = 0;
  if (o_.victims != nullptr) o_.victims->ActiveAt(now, &first, &last);
  if (last > first && (victim_credit_ += o_.victim_share) >= 1) {
    victim_credit_ -= 1;
    // Four in five to the victims in focus, if any; the rest to all.
    int focus_first = 0, focus_last = 0;
    if (++victim_picks_ % 5 != 0) {
      o_.victims->FocusAt(now, &focus_first, &focus_last);
    }
    int victim = 0;
    if (focus_last > focus_first) {
      victim = focus_first +
               static_cast<int>(focus_turn_++ % (focus_last - focus_first));
    } else {
      victim = first + static_cast<int>(victim_turn_++ % (last - first));
    }
    SetKey(VictimKey(victim, key_buf_));
    return victim;
  }
  if (o_.zipf != nullptr) {
    key_id_ = static_cast<uint64_t>(o_.zipf->Rank(rng_.Unit()));
  } else {
    key_id_ = static_cast<uint64_t>(next_key_);
    next_key_ = (next_key_ + o_.key_stride) % o_.endpoints;
  }
  // Drawn for every background delivery, so the keys drawn do not depend
  // on fail_share.
  fail_next_ = rng_.Unit() < o_.fail_share;
  SetKey(FormatKey(key_id_, key_buf_));
  return -1;
}

void DeliveryWorker::SetKey(absl::string_view key) {
  admit_.set_endpoint(key.data(), key.size());
  report_.set_endpoint(key.data(), key.size());
}

bool DeliveryWorker::Call(bool admit, int64_t* sent, int64_t* answered) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(o_.call_timeout));
  *sent = NowNs();
  const grpc::Status s =
      admit ? stub_->Admit(&ctx, admit_, &admit_resp_)
            : stub_->Report(&ctx, report_, &report_resp_);
  *answered = NowNs();
  if (!s.ok()) RecordError(s);
  return s.ok();
}

void DeliveryWorker::RecordError(const grpc::Status& s) {
  if (stats_.errors++ == 0) {
    stats_.first_error = absl::StrCat("status ", s.error_code(), ": ",
                                      s.error_message());
  }
}

void DeliveryWorker::Deliver(int64_t start) {
  const bool measured = start >= clock_->measure_from();
  const int victim = NextKey(start);
  admit_.set_attempt(1);
  int64_t a0 = 0, a1 = 0;
  if (!Call(/*admit=*/true, &a0, &a1)) return;
  const v1::Decision& d = admit_resp_.decision();
  const bool proceed = d.verdict() == v1::PROCEED;
  if (victim >= 0) {
    stats_.admits.push_back({victim, o_.target_index, a0, a1, d.verdict(),
                             d.reason(), d.admission(), -1});
  }
  if (measured) {
    ++stats_.started;
    stats_.admit.Record(a1 - a0);
    if (!proceed) ++stats_.not_admitted;
    if (proceed && d.admission() == engine::kLocalAdmission) {
      ++stats_.local_admits;
    }
  }
  if (!proceed) return;
  // A victim's outcome is its phase when the attempt "is sent".
  const bool fails =
      victim >= 0 ? o_.victims->IsDown(victim, NowNs()) : fail_next_;
  report_.set_attempt(1);
  report_.set_outcome(fails ? v1::RETRYABLE_FAILURE : v1::SUCCESS);
  report_.set_admission(d.admission());
  int64_t r0 = 0, r1 = 0;
  const bool ok = Call(/*admit=*/false, &r0, &r1);
  if (victim >= 0) stats_.admits.back().report_ns = r0;
  if (!ok) return;
  const v1::Decision& r = report_resp_.decision();
  if (fails) {
    if (victim >= 0) {
      stats_.failures.push_back({victim, o_.target_index, r0, r1, r.reason()});
    }
    if (measured) ++stats_.failed;
    if (victim < 0) Schedule(r, measured);
    return;
  }
  if (!measured) return;
  if (r.verdict() != v1::DONE) {
    ++stats_.unexpected;
    return;
  }
  ++stats_.delivered;
  stats_.report.Record(r1 - r0);
  stats_.delivery.Record(r1 - a0);
}

void DeliveryWorker::Schedule(const v1::Decision& d, bool measured) {
  const auto ns = [](const google::protobuf::Duration& x) {
    return x.seconds() * 1000000000 + x.nanos();
  };
  int64_t wait = 0;
  if (d.verdict() == v1::PROCEED) {
    wait = ns(d.delay());
  } else if (d.verdict() == v1::DEFER) {
    wait = ns(d.defer_for());
  } else {
    if (measured) ++stats_.gave_up;
    return;
  }
  if (measured) stats_.retry_wait.Record(wait);
  wait = std::clamp<int64_t>(wait, 0, o_.max_retry_wait_ns);
  retries_.push({NowNs() + wait, key_id_, measured});
}

void DeliveryWorker::RetryNext() {
  const Retry retry = retries_.top();
  retries_.pop();
  key_id_ = retry.key;
  SetKey(FormatKey(retry.key, key_buf_));
  admit_.set_attempt(2);
  int64_t a0 = 0, a1 = 0;
  if (!Call(/*admit=*/true, &a0, &a1)) return;
  const v1::Decision& d = admit_resp_.decision();
  if (d.verdict() != v1::PROCEED) {
    if (d.verdict() == v1::DEFER && retry.measured) ++stats_.retry_deferred;
    Schedule(d, retry.measured);  // DEFER: again at its time; else ended
    return;
  }
  report_.set_attempt(2);
  report_.set_outcome(v1::SUCCESS);
  report_.set_admission(d.admission());
  int64_t r0 = 0, r1 = 0;
  if (!Call(/*admit=*/false, &r0, &r1) || !retry.measured) return;
  if (report_resp_.decision().verdict() != v1::DONE) {
    ++stats_.unexpected;
    return;
  }
  ++stats_.delivered;
  ++stats_.retried;
}

}  // namespace stagger::bench
