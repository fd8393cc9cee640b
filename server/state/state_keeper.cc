#include "server/state/state_keeper.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "server/state/state_record.h"

namespace stagger::state {

StateKeeper::StateKeeper(engine::Engine* engine, const engine::Clock* clock,
                         Options options)
    : engine_(engine), clock_(clock), options_(std::move(options)) {
  if (!options_.log) options_.log = [](const std::string&) {};
  if (options_.writer.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    options_.writer = absl::StrCat("staggerd pid ", getpid(), " on ", host);
  }
}

void StateKeeper::CountLoad(LoadOutcome outcome, int64_t restored) {
  if (options_.metrics == nullptr) return;
  if (outcome != LoadOutcome::kLoaded) {
    options_.metrics->RecordStateLoadFailure(LoadOutcomeName(outcome));
  }
  options_.metrics->RecordStateRestored(restored);
}

StateKeeper::~StateKeeper() { EndThread(); }

StateKeeper::LoadSummary StateKeeper::Load() {
  const absl::Time started = clock_->Now();
  LoadSummary summary;
  std::vector<engine::EndpointRecord> batch;
  batch.reserve(kImportBatch);
  std::vector<engine::Disable> disabled;
  auto flush = [&] {
    const engine::ImportStats s = engine_->ImportState(batch);
    summary.import.restored += s.restored;
    summary.import.stale += s.stale;
    summary.import.rejected += s.rejected;
    summary.import.skipped += s.skipped;
    batch.clear();
  };
  const LoadResult r = LoadSnapshot(
      options_.path,
      [&](const v1::state::Endpoint& e) {
        batch.push_back(FromProto(e));
        if (batch.size() == kImportBatch) flush();
      },
      [&](const v1::state::Pause& p) { RestorePause(p, &summary); },
      [&](const v1::state::Disabled& d) { disabled.push_back(FromProto(d)); });
  if (!batch.empty()) flush();
  // After every record: a disable tracks its endpoint.
  for (const engine::Disable& d : disabled) RestoreDisabled(d, &summary);
  summary.outcome = r.outcome;
  if (r.outcome != LoadOutcome::kLoaded) {
    options_.log(absl::StrCat(r.message, "; starting with fresh state"));
    CountLoad(r.outcome, 0);
    return summary;
  }
  const absl::Duration age =
      clock_->Now() - absl::FromUnixNanos(r.written_unix_nanos);
  options_.log(absl::StrCat(
      r.message, " written ", absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(1))),
      " ago by \"", r.writer, "\": restored ", summary.import.restored,
      ", dropped ", summary.import.stale, " idle past the eviction age, ",
      summary.import.rejected, " with keys now invalid, ",
      summary.import.skipped, " already tracked or over max_endpoints; ",
      summary.pauses_restored, " pauses restored, ", summary.pauses_ended,
      " ended meanwhile, ", summary.pauses_refused, " refused; ",
      summary.disabled_restored, " disabled endpoints restored, ",
      summary.disabled_refused, " refused; in ",
      absl::FormatDuration(
          absl::Trunc(clock_->Now() - started, absl::Milliseconds(1)))));
  CountLoad(r.outcome, summary.import.restored);
  return summary;
}

void StateKeeper::RestorePause(const v1::state::Pause& proto,
                               LoadSummary* summary) {
  const absl::Status s =
      engine_->pauses().Restore(FromProto(proto), clock_->Now());
  if (s.ok()) {
    ++summary->pauses_restored;
  } else if (absl::IsFailedPrecondition(s)) {
    ++summary->pauses_ended;
  } else {
    ++summary->pauses_refused;
    options_.log(absl::StrCat("state file ", options_.path, ": the pause of ",
                              proto.prefix() ? "prefix \"" : "endpoint \"",
                              absl::CEscape(proto.target().substr(0, 200)),
                              "\" is not restored: ", s.message()));
  }
}

void StateKeeper::RestoreDisabled(const engine::Disable& d,
                                  LoadSummary* summary) {
  const absl::Status s = engine_->RestoreDisable(d);
  if (s.ok()) {
    ++summary->disabled_restored;
    return;
  }
  ++summary->disabled_refused;
  options_.log(absl::StrCat("state file ", options_.path,
                            ": the disable of endpoint \"",
                            absl::CEscape(d.endpoint.substr(0, 200)),
                            "\" is not restored: ", s.message()));
}

absl::Status StateKeeper::SaveNow() {
  absl::MutexLock l(&save_mu_);
  const absl::Time now = clock_->Now();
  absl::Status status;
  int64_t records = 0;
  int64_t bytes = 0;
  auto writer = SnapshotWriter::Begin(options_.path, absl::ToUnixNanos(now),
                                      options_.writer);
  if (!writer.ok()) {
    status = writer.status();
  } else {
    v1::state::Pause pause;
    for (const engine::Pause& p : engine_->pauses().List(now)) {
      ToProto(p, &pause);
      if (status.ok()) status = (*writer)->AddPause(pause);
    }
    v1::state::Endpoint proto;
    engine_->ExportState([&](absl::Span<const engine::EndpointRecord> part) {
      for (const engine::EndpointRecord& r : part) {
        if (!status.ok()) return;
        ToProto(r, &proto);
        status = (*writer)->Add(proto);
      }
    });
    v1::state::Disabled disabled;
    for (const engine::Disable& d : engine_->disables().List()) {
      ToProto(d, &disabled);
      if (status.ok()) status = (*writer)->AddDisabled(disabled);
    }
    records = (*writer)->records();
    if (status.ok()) status = (*writer)->Commit();
    bytes = (*writer)->bytes();
  }
  if (options_.metrics != nullptr) {
    options_.metrics->RecordStateSave(status.ok(), now);
  }
  if (!status.ok()) {
    options_.log(absl::StrCat("state not saved (the previous snapshot, if "
                              "any, stays): ", status.message()));
  } else if (stopped_) {
    options_.log(absl::StrCat(
        "state saved to ", options_.path, ": ", records, " endpoints, ", bytes,
        " bytes in ",
        absl::FormatDuration(absl::Trunc(clock_->Now() - now, absl::Milliseconds(1)))));
  }
  return status;
}

void StateKeeper::Start() {
  if (thread_.joinable() || stopped_) return;
  thread_ = std::thread([this] { Loop(); });
}

void StateKeeper::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(options_.save_interval)) {
    (void)SaveNow();
  }
}

void StateKeeper::EndThread() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void StateKeeper::Stop() {
  if (stopped_) return;
  EndThread();
  stopped_ = true;
  (void)SaveNow();
}

}  // namespace stagger::state
