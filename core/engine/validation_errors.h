// ValidationErrors: everything wrong with a structured value (a config), as
// data: a list of {field path, message}, in the style of gRPC's
// ValidationErrors::ScopedField.
//
// Contract:
//  - A ScopedField adds one component to the current path for as long as it
//    lives: a name ("backoff") or an index of a repeated field (2, written
//    "[2]"). Scopes nest and end in reverse order, as stack objects do, so a
//    helper names only its own field and never builds a path string.
//  - Add(message) records {current path, message}. Errors keep the order
//    they were added in; nothing is sorted, merged or de-duplicated (a
//    caller that wants that works on errors()).
//  - ToStatus(): OK if there are no errors, else InvalidArgument with one
//    line per error, in order, each "path: message" (FieldError::ToString).
//  - Abseil only (it lives in the engine layer so that ValidateEngineConfig
//    can use it; server/config builds on it). Not thread-safe: one instance
//    per validation.
#ifndef STAGGER_CORE_ENGINE_VALIDATION_ERRORS_H_
#define STAGGER_CORE_ENGINE_VALIDATION_ERRORS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stagger::engine {

struct FieldError {
  // Components from the root: names, and indices written "[i]", e.g.
  // {"overrides", "[2]", "policy", "backoff", "cap"}. Empty: the whole value.
  std::vector<std::string> path;
  std::string message;  // e.g. "must be >= base (0.2s), got 0.1s"

  // The path as written in messages: "overrides[2].policy.backoff.cap".
  std::string Field() const;
  // "overrides[2].policy.backoff.cap: must be ..."; the message alone when
  // the path is empty.
  std::string ToString() const;

  bool operator==(const FieldError& o) const {
    return path == o.path && message == o.message;
  }
  bool operator!=(const FieldError& o) const { return !(*this == o); }
};

class ValidationErrors {
 public:
  // One path component, for the scope of a block.
  class ScopedField {
   public:
    ScopedField(ValidationErrors* errors, absl::string_view name);
    ScopedField(ValidationErrors* errors, size_t index);  // "[index]"
    ~ScopedField();

    ScopedField(const ScopedField&) = delete;
    ScopedField& operator=(const ScopedField&) = delete;

   private:
    ValidationErrors* errors_;
  };

  // Copy or move only when no ScopedField is open on it.
  ValidationErrors() = default;

  // Records `message` at the current path.
  void Add(absl::string_view message);
  // Records an error found elsewhere (another ValidationErrors, a parser),
  // its path taken as below the current path.
  void Add(const FieldError& error);

  bool ok() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<FieldError>& errors() const { return errors_; }

  absl::Status ToStatus() const;

 private:
  std::vector<std::string> path_;  // the open scopes, outermost first
  std::vector<FieldError> errors_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_VALIDATION_ERRORS_H_
