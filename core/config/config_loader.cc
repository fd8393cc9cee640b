// Config loading; see config_loader.h for the contract.
#include "core/config/config_loader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "core/wire/wire.h"
#include "core/config/json_config.h"
#include "core/engine/engine_config.h"
#include "core/engine/validation_errors.h"

namespace stagger::config {
namespace {

namespace pb = ::stagger::v1::config;

// ---------------------------------------------------------------------------
// Errors. Every error the loader reports is a ConfigError until it is
// rendered, once, by ErrorsToStatus: nothing is cut back out of a Status
// message.

// One error: where it is in the text ({0, 0} if not known) and the field it
// is about (an empty path for a plain syntax error).
using ConfigError = LocatedError;

ConfigError SyntaxError(TextPosition at, std::string message) {
  return {at, engine::FieldError{{}, std::move(message)}};
}

// "file:L:C: error", "L:C: error", "file: error" or "error", where error is
// "path: message" or the message alone.
std::string Render(const ConfigError& e, absl::string_view file) {
  std::string out(file);
  if (e.at.line > 0) {
    absl::StrAppend(&out, file.empty() ? "" : ":", e.at.line, ":", e.at.column,
                    ": ");
  } else if (!file.empty()) {
    out += ": ";
  }
  out += e.error.ToString();
  return out;
}

absl::Status ErrorsToStatus(const std::vector<ConfigError>& errors,
                            absl::string_view file) {
  return absl::InvalidArgumentError(absl::StrJoin(
      errors, "\n", [file](std::string* out, const ConfigError& e) {
        out->append(Render(e, file));
      }));
}

// ---------------------------------------------------------------------------
// Textproto.

class CollectingErrorCollector final
    : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    // The parser's numbers are 0-based; -1 means "no position".
    TextPosition at;
    if (line >= 0) at = {line + 1, column + 1};
    errors.push_back(SyntaxError(at, message));
  }

  std::vector<ConfigError> errors;
};

absl::StatusOr<pb::Config> ParseTextproto(absl::string_view text,
                                          absl::string_view file) {
  pb::Config config;
  CollectingErrorCollector collector;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(std::string(text), &config)) {
    if (collector.errors.empty()) {
      collector.errors.push_back(SyntaxError({}, "textproto parse error"));
    }
    return ErrorsToStatus(collector.errors, file);
  }
  return config;
}

// ---------------------------------------------------------------------------
// JSON: strict syntax, the fields against config.proto's descriptor, then
// protobuf's parser, whose error text is passed through unread
// (json_config.h).

absl::StatusOr<pb::Config> ParseJson(absl::string_view text,
                                     absl::string_view file) {
  pb::Config config;
  const std::vector<ConfigError> errors = ParseJsonMessage(text, &config);
  if (!errors.empty()) return ErrorsToStatus(errors, file);
  return config;
}

absl::StatusOr<pb::Config> Parse(absl::string_view text, Format format,
                                 absl::string_view file) {
  if (text.size() > kMaxConfigBytes) {
    return ErrorsToStatus(
        {SyntaxError({},
                     absl::StrCat("larger than ", kMaxConfigBytes, " bytes"))},
        file);
  }
  return format == Format::kJson ? ParseJson(text, file)
                                 : ParseTextproto(text, file);
}

// ---------------------------------------------------------------------------
// Conversion.

using Scoped = engine::ValidationErrors::ScopedField;

// proto -> EngineConfig, field by field, recording conversion errors (a
// malformed Duration, an unknown enum value, an override without a match)
// with their paths. Ranges are ValidateEngineConfig's job, not this one's.
class Converter {
 public:
  explicit Converter(engine::ValidationErrors* errors) : errors_(errors) {}

  // A present, well-formed Duration replaces *out. Negative values pass
  // (ValidateEngineConfig reports them against the field's range); a
  // malformed one is reported here and leaves *out as it was, so that it
  // is not reported twice.
  void Duration(absl::string_view name, bool present,
                const google::protobuf::Duration& d, absl::Duration* out) {
    if (!present) return;
    constexpr int64_t kMaxSeconds = 315576000000;  // 10000 years, as proto
    const int64_t s = d.seconds();
    const int32_t n = d.nanos();
    Scoped field(errors_, name);
    if (s < -kMaxSeconds || s > kMaxSeconds) {
      errors_->Add(absl::StrCat("invalid duration: seconds must be in [",
                                -kMaxSeconds, ", ", kMaxSeconds, "], got ", s));
    } else if (n < -999999999 || n > 999999999) {
      errors_->Add(absl::StrCat(
          "invalid duration: nanos must be in [-999999999, 999999999], got ",
          n));
    } else if ((s > 0 && n < 0) || (s < 0 && n > 0)) {
      errors_->Add(absl::StrCat("invalid duration: seconds (", s,
                                ") and nanos (", n,
                                ") must have the same sign"));
    } else {
      *out = absl::Seconds(s) + absl::Nanoseconds(n);
    }
  }

  void Kind(const pb::Backoff& b, engine::BackoffKind* out) {
    if (!b.has_kind()) return;
    switch (b.kind()) {
      case pb::Backoff::KIND_UNSPECIFIED:
        break;  // unset: keep the inherited kind
      case pb::Backoff::EXPONENTIAL:
        *out = engine::BackoffKind::kExponential;
        break;
      case pb::Backoff::EQUAL_JITTER:
        *out = engine::BackoffKind::kEqualJitter;
        break;
      case pb::Backoff::FULL_JITTER:
        *out = engine::BackoffKind::kFullJitter;
        break;
      case pb::Backoff::DECORRELATED_JITTER:
        *out = engine::BackoffKind::kDecorrelatedJitter;
        break;
      default: {
        Scoped field(errors_, "kind");
        errors_->Add(
            absl::StrCat("unknown value ", static_cast<int>(b.kind())));
      }
    }
  }

  void Backoff(const pb::Backoff& b, engine::BackoffParams* out) {
    Kind(b, &out->kind);
    Duration("base", b.has_base(), b.base(), &out->base);
    Duration("cap", b.has_cap(), b.cap(), &out->cap);
    if (b.has_max_attempts()) out->max_attempts = b.max_attempts();
    Duration("initial_jitter", b.has_initial_jitter(), b.initial_jitter(),
             &out->initial_jitter);
    Duration("retry_after_max", b.has_retry_after_max(), b.retry_after_max(),
             &out->retry_after_max);
    Duration("horizon", b.has_horizon(), b.horizon(), &out->horizon);
  }

  void Budget(const pb::RetryBudget& b, engine::BudgetParams* out) {
    if (b.has_ratio()) out->ratio = b.ratio();
    if (b.has_min_retries_per_second()) {
      out->min_retries_per_second = b.min_retries_per_second();
    }
    Duration("window", b.has_window(), b.window(), &out->window);
  }

  void Breaker(const pb::CircuitBreaker& b, engine::BreakerParams* out) {
    if (b.has_enabled()) out->enabled = b.enabled();
    if (b.has_consecutive_failures()) {
      out->consecutive_failures = b.consecutive_failures();
    }
    if (b.has_failure_ratio()) out->failure_ratio = b.failure_ratio();
    if (b.has_min_throughput()) out->min_throughput = b.min_throughput();
    Duration("window", b.has_window(), b.window(), &out->window);
    Duration("open_base", b.has_open_base(), b.open_base(), &out->open_base);
    Duration("open_max", b.has_open_max(), b.open_max(), &out->open_max);
    if (b.has_half_open_probes()) out->half_open_probes = b.half_open_probes();
    if (b.has_close_after_successes()) {
      out->close_after_successes = b.close_after_successes();
    }
    Duration("probe_timeout", b.has_probe_timeout(), b.probe_timeout(),
             &out->probe_timeout);
  }

  void Deferral(const pb::Deferral& d, engine::DeferralParams* out) {
    Duration("spread", d.has_spread(), d.spread(), &out->spread);
    if (d.has_release_rate_per_second()) {
      out->release_rate_per_second = d.release_rate_per_second();
    }
  }

  void Disable(const pb::Disable& d, engine::DisableParams* out) {
    Duration("after_unavailable", d.has_after_unavailable(),
             d.after_unavailable(), &out->after_unavailable);
    if (d.has_permanent_failures()) {
      out->permanent_failures = d.permanent_failures();
    }
    Duration("window", d.has_window(), d.window(), &out->window);
  }

  // `inherited`: the values unset fields take. `inherited_ram_explicit`:
  // whether inherited.backoff.retry_after_max was set in the file (else it
  // follows this policy's cap). Returns whether this policy's
  // retry_after_max is explicit.
  bool Policy(const pb::Policy& p, const engine::PolicyParams& inherited,
              bool inherited_ram_explicit, engine::PolicyParams* out) {
    *out = inherited;
    {
      Scoped field(errors_, "backoff");
      Backoff(p.backoff(), &out->backoff);
    }
    {
      Scoped field(errors_, "budget");
      Budget(p.budget(), &out->budget);
    }
    {
      Scoped field(errors_, "breaker");
      Breaker(p.breaker(), &out->breaker);
    }
    {
      Scoped field(errors_, "deferral");
      Deferral(p.deferral(), &out->deferral);
    }
    {
      Scoped field(errors_, "disable");
      Disable(p.disable(), &out->disable);
    }
    const bool explicit_ram = p.backoff().has_retry_after_max();
    if (!explicit_ram && !inherited_ram_explicit) {
      out->backoff.retry_after_max = out->backoff.cap;
    }
    return explicit_ram || inherited_ram_explicit;
  }

  // An override whose match is unset gets a placeholder pattern so that
  // the range check does not report it a second time; the config is
  // refused either way.
  engine::PolicyOverride Override(const pb::Override& o,
                                  const engine::PolicyParams& defaults,
                                  bool default_ram_explicit) {
    engine::PolicyOverride po;
    switch (o.match_case()) {
      case pb::Override::kPrefix:
        po.match = engine::PolicyOverride::Match::kPrefix;
        po.pattern = o.prefix();
        break;
      case pb::Override::kGlob:
        po.match = engine::PolicyOverride::Match::kGlob;
        po.pattern = o.glob();
        break;
      default: {
        Scoped field(errors_, "match");
        errors_->Add("set prefix or glob");
        po.pattern = "(unset)";
      }
    }
    Scoped field(errors_, "policy");
    Policy(o.policy(), defaults, default_ram_explicit, &po.policy);
    return po;
  }

  void Limits(const pb::Limits& l, engine::Limits* out) {
    if (l.has_max_key_bytes()) out->max_key_bytes = l.max_key_bytes();
    if (l.has_max_endpoints()) out->max_endpoints = l.max_endpoints();
    Duration("idle_eviction", l.has_idle_eviction(), l.idle_eviction(),
             &out->idle_eviction);
    if (l.has_max_batch_size()) out->max_batch_size = l.max_batch_size();
  }

  engine::EngineConfig Config(const pb::Config& config) {
    engine::EngineConfig out;
    bool default_ram_explicit;
    {
      Scoped field(errors_, "default_policy");
      const engine::PolicyParams defaults;  // engine_config.h's defaults
      default_ram_explicit =
          Policy(config.default_policy(), defaults,
                 /*inherited_ram_explicit=*/false, &out.default_policy);
    }
    {
      Scoped field(errors_, "overrides");
      for (int i = 0; i < config.overrides_size(); ++i) {
        Scoped index(errors_, static_cast<size_t>(i));
        out.overrides.push_back(Override(
            config.overrides(i), out.default_policy, default_ram_explicit));
      }
    }
    Scoped field(errors_, "limits");
    Limits(config.limits(), &out.limits);
    return out;
  }

 private:
  engine::ValidationErrors* errors_;
};

// An override inherits default_policy's values, and with them its errors:
// an error at overrides[i].policy.X saying exactly what default_policy.X
// says (same path below the policy, same message) is that inherited error.
// Returns `errors` without those, so each is reported once, where the value
// was written.
std::vector<engine::FieldError> WithoutInheritedErrors(
    const std::vector<engine::FieldError>& errors) {
  // default_policy's errors with their paths relative to the policy.
  std::vector<engine::FieldError> in_default;
  for (const engine::FieldError& e : errors) {
    if (!e.path.empty() && e.path[0] == "default_policy") {
      in_default.push_back({{e.path.begin() + 1, e.path.end()}, e.message});
    }
  }
  std::vector<engine::FieldError> out;
  for (const engine::FieldError& e : errors) {
    const bool in_override_policy =
        e.path.size() > 3 && e.path[0] == "overrides" && e.path[2] == "policy";
    if (in_override_policy &&
        absl::c_linear_search(
            in_default, engine::FieldError{{e.path.begin() + 3, e.path.end()},
                                           e.message})) {
      continue;
    }
    out.push_back(e);
  }
  return out;
}

// Converts and validates: every conversion error, then every range error
// that is not inherited, each with its path and no position. Empty if
// `*out` is a valid configuration.
std::vector<ConfigError> Convert(const pb::Config& config,
                                 engine::EngineConfig* out) {
  engine::ValidationErrors conversion;
  *out = Converter(&conversion).Config(config);
  engine::ValidationErrors range;
  engine::ValidateEngineConfig(*out, &range);
  std::vector<ConfigError> errors;
  for (const engine::FieldError& e : conversion.errors()) {
    errors.push_back({{}, e});
  }
  for (engine::FieldError& e : WithoutInheritedErrors(range.errors())) {
    errors.push_back({{}, std::move(e)});
  }
  return errors;
}

pb::Backoff::Kind KindToProto(engine::BackoffKind k) {
  switch (k) {
    case engine::BackoffKind::kExponential:
      return pb::Backoff::EXPONENTIAL;
    case engine::BackoffKind::kEqualJitter:
      return pb::Backoff::EQUAL_JITTER;
    case engine::BackoffKind::kFullJitter:
      return pb::Backoff::FULL_JITTER;
    case engine::BackoffKind::kDecorrelatedJitter:
      return pb::Backoff::DECORRELATED_JITTER;
  }
  return pb::Backoff::KIND_UNSPECIFIED;
}

void PolicyToProto(const engine::PolicyParams& p, pb::Policy* out) {
  pb::Backoff* b = out->mutable_backoff();
  b->set_kind(KindToProto(p.backoff.kind));
  wire::ToProto(p.backoff.base, b->mutable_base());
  wire::ToProto(p.backoff.cap, b->mutable_cap());
  b->set_max_attempts(p.backoff.max_attempts);
  wire::ToProto(p.backoff.initial_jitter, b->mutable_initial_jitter());
  wire::ToProto(p.backoff.retry_after_max, b->mutable_retry_after_max());
  wire::ToProto(p.backoff.horizon, b->mutable_horizon());

  pb::RetryBudget* r = out->mutable_budget();
  r->set_ratio(p.budget.ratio);
  r->set_min_retries_per_second(p.budget.min_retries_per_second);
  wire::ToProto(p.budget.window, r->mutable_window());

  pb::CircuitBreaker* c = out->mutable_breaker();
  c->set_enabled(p.breaker.enabled);
  c->set_consecutive_failures(p.breaker.consecutive_failures);
  c->set_failure_ratio(p.breaker.failure_ratio);
  c->set_min_throughput(p.breaker.min_throughput);
  wire::ToProto(p.breaker.window, c->mutable_window());
  wire::ToProto(p.breaker.open_base, c->mutable_open_base());
  wire::ToProto(p.breaker.open_max, c->mutable_open_max());
  c->set_half_open_probes(p.breaker.half_open_probes);
  c->set_close_after_successes(p.breaker.close_after_successes);
  wire::ToProto(p.breaker.probe_timeout, c->mutable_probe_timeout());

  pb::Deferral* d = out->mutable_deferral();
  wire::ToProto(p.deferral.spread, d->mutable_spread());
  if (p.deferral.release_rate_per_second != 0) {  // 0: no cap, left unset
    d->set_release_rate_per_second(p.deferral.release_rate_per_second);
  }

  pb::Disable* off = out->mutable_disable();
  wire::ToProto(p.disable.after_unavailable, off->mutable_after_unavailable());
  off->set_permanent_failures(p.disable.permanent_failures);
  wire::ToProto(p.disable.window, off->mutable_window());
}

}  // namespace

absl::StatusOr<Format> FormatForPath(absl::string_view path) {
  const size_t slash = path.rfind('/');
  absl::string_view base =
      slash == absl::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = base.rfind('.');
  const std::string ext = absl::AsciiStrToLower(
      dot == absl::string_view::npos ? "" : base.substr(dot));
  if (ext == ".json") return Format::kJson;
  if (ext == ".textproto" || ext == ".txtpb" || ext == ".pbtxt" ||
      ext == ".cfg" || ext == ".conf") {
    return Format::kTextproto;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ",
      ext.empty() ? std::string("no file extension")
                  : absl::StrCat("unknown config file extension \"", ext, "\""),
      " (want .json, or .textproto, .txtpb, .pbtxt, .cfg, .conf)"));
}

absl::StatusOr<v1::config::Config> ParseConfigText(absl::string_view text,
                                                   Format format) {
  return Parse(text, format, "");
}

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  std::string out;
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot read"));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > kMaxConfigBytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", kMaxConfigBytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::StatusOr<v1::config::Config> ParseConfigFile(const std::string& path) {
  absl::StatusOr<Format> format = FormatForPath(path);
  if (!format.ok()) return format.status();
  absl::StatusOr<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, *format, path);
}

absl::StatusOr<engine::EngineConfig> ToEngineConfig(
    const v1::config::Config& config) {
  engine::EngineConfig out;
  const std::vector<ConfigError> errors = Convert(config, &out);
  if (!errors.empty()) return ErrorsToStatus(errors, "");
  return out;
}

v1::config::Config ToProto(const engine::EngineConfig& config) {
  pb::Config out;
  PolicyToProto(config.default_policy, out.mutable_default_policy());
  for (const engine::PolicyOverride& o : config.overrides) {
    pb::Override* po = out.add_overrides();
    if (o.match == engine::PolicyOverride::Match::kGlob) {
      po->set_glob(o.pattern);
    } else {
      po->set_prefix(o.pattern);
    }
    PolicyToProto(o.policy, po->mutable_policy());
  }
  pb::Limits* l = out.mutable_limits();
  l->set_max_key_bytes(config.limits.max_key_bytes);
  l->set_max_endpoints(config.limits.max_endpoints);
  wire::ToProto(config.limits.idle_eviction, l->mutable_idle_eviction());
  l->set_max_batch_size(config.limits.max_batch_size);
  return out;
}

absl::StatusOr<engine::EngineConfig> LoadConfigText(absl::string_view text,
                                                    absl::string_view path) {
  absl::StatusOr<Format> format = FormatForPath(path);
  if (!format.ok()) return format.status();
  absl::StatusOr<pb::Config> proto = Parse(text, *format, path);
  if (!proto.ok()) return proto.status();
  engine::EngineConfig config;
  const std::vector<ConfigError> errors = Convert(*proto, &config);
  if (!errors.empty()) return ErrorsToStatus(errors, path);
  return config;
}

absl::StatusOr<engine::EngineConfig> LoadConfigFile(const std::string& path) {
  absl::StatusOr<Format> format = FormatForPath(path);
  if (!format.ok()) return format.status();
  absl::StatusOr<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return LoadConfigText(*text, path);
}

engine::EngineConfig DefaultEngineConfig() {
  engine::EngineConfig config;
  // retry_after_max follows cap when unset (config.proto); the header's
  // default equals the default cap already, but keep the rule explicit.
  config.default_policy.backoff.retry_after_max =
      config.default_policy.backoff.cap;
  return config;
}

}  // namespace stagger::config
