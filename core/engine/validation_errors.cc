// ValidationErrors; see validation_errors.h for the contract.
#include "core/engine/validation_errors.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace stagger::engine {

std::string FieldError::Field() const {
  std::string out;
  for (const std::string& part : path) {
    if (!out.empty() && (part.empty() || part.front() != '[')) out += '.';
    out += part;
  }
  return out;
}

std::string FieldError::ToString() const {
  if (path.empty()) return message;
  return absl::StrCat(Field(), ": ", message);
}

ValidationErrors::ScopedField::ScopedField(ValidationErrors* errors,
                                           absl::string_view name)
    : errors_(errors) {
  errors_->path_.emplace_back(name);
}

ValidationErrors::ScopedField::ScopedField(ValidationErrors* errors,
                                           size_t index)
    : errors_(errors) {
  errors_->path_.push_back(absl::StrCat("[", index, "]"));
}

ValidationErrors::ScopedField::~ScopedField() { errors_->path_.pop_back(); }

void ValidationErrors::Add(absl::string_view message) {
  errors_.push_back(FieldError{path_, std::string(message)});
}

void ValidationErrors::Add(const FieldError& error) {
  FieldError e{path_, error.message};
  e.path.insert(e.path.end(), error.path.begin(), error.path.end());
  errors_.push_back(std::move(e));
}

absl::Status ValidationErrors::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrJoin(errors_, "\n", [](std::string* out, const FieldError& e) {
        out->append(e.ToString());
      }));
}

}  // namespace stagger::engine
