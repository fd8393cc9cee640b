#include "bench/agent/delivery_worker.h"

#include <chrono>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/engine/decision.h"

namespace stagger::bench {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void WorkerStats::Merge(WorkerStats& o) {
  started += o.started;
  delivered += o.delivered;
  local_admits += o.local_admits;
  not_admitted += o.not_admitted;
  failed += o.failed;
  unexpected += o.unexpected;
  errors += o.errors;
  if (first_error.empty()) first_error = o.first_error;
  delivery.Merge(o.delivery);
  admit.Merge(o.admit);
  report.Merge(o.report);
  admits.insert(admits.end(), std::make_move_iterator(o.admits.begin()),
                std::make_move_iterator(o.admits.end()));
  failures.insert(failures.end(), std::make_move_iterator(o.failures.begin()),
                  std::make_move_iterator(o.failures.end()));
  o.admits.clear();
  o.failures.clear();
}

DeliveryWorker::DeliveryWorker(WorkerOptions options, const DriveClock* clock)
    : o_(std::move(options)), clock_(clock), next_key_(o_.first_key) {
  // first_key + k * key_stride < endpoints, k = 0, 1, ...
  keys_ = o_.first_key < o_.endpoints
              ? (o_.endpoints - 1 - o_.first_key) / o_.key_stride + 1
              : 1;
  admit_.set_attempt(1);
  report_.set_attempt(1);
}

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
    int64_t now = NowNs();
    if (now >= clock_->end()) return;
    if (interval > 0) {
      if (next > now) {
        absl::SleepFor(absl::Nanoseconds(next - now));
        now = NowNs();
        if (now >= clock_->end()) return;
      }
      next = std::max(next + interval, now - kMaxLagNs);
    }
    Deliver(now);
  }
}

int DeliveryWorker::NextKey(int64_t now) {
  int first = 0, last = 0;
  if (o_.victims != nullptr) o_.victims->ActiveAt(now, &first, &last);
  int victim = -1;
  absl::string_view key;
  if (last > first && (victim_credit_ += o_.victim_share) >= 1) {
    victim_credit_ -= 1;
    // Four in five to the victims in focus, if any; the rest to all.
    int focus_first = 0, focus_last = 0;
    if (++victim_picks_ % 5 != 0) {
      o_.victims->FocusAt(now, &focus_first, &focus_last);
    }
    if (focus_last > focus_first) {
      victim = focus_first +
               static_cast<int>(focus_turn_++ % (focus_last - focus_first));
    } else {
      victim = first + static_cast<int>(victim_turn_++ % (last - first));
    }
    key = VictimKey(victim, key_buf_);
  } else {
    key = FormatKey(static_cast<uint64_t>(next_key_), key_buf_);
    next_key_ = (next_key_ + o_.key_stride) % o_.endpoints;
    CountLap(now);
  }
  admit_.set_endpoint(key.data(), key.size());
  report_.set_endpoint(key.data(), key.size());
  return victim;
}

void DeliveryWorker::CountLap(int64_t now) {
  if (lap_keys_++ == 0) lap_start_ns_ = now;
  if (lap_keys_ == keys_) {
    covered_from_.store(lap_start_ns_, std::memory_order_relaxed);
    lap_keys_ = 0;
  }
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
  const bool fails = victim >= 0 && o_.victims->IsDown(victim, NowNs());
  report_.set_outcome(fails ? v1::RETRYABLE_FAILURE : v1::SUCCESS);
  report_.set_admission(d.admission());
  int64_t r0 = 0, r1 = 0;
  const bool ok = Call(/*admit=*/false, &r0, &r1);
  if (victim >= 0) stats_.admits.back().report_ns = r0;
  if (!ok) return;
  const v1::Decision& r = report_resp_.decision();
  if (fails) {
    stats_.failures.push_back({victim, o_.target_index, r0, r1, r.reason()});
    if (measured) ++stats_.failed;
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

}  // namespace stagger::bench
