// Tests of core/engine/validation_errors: scoped paths (nesting, repeated
// fields, scope exit), the order errors are kept in, errors added from
// elsewhere, and the Status they render to.
#include "core/engine/validation_errors.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

using ::testing::ElementsAre;
using Scoped = ValidationErrors::ScopedField;

std::vector<std::string> Lines(const ValidationErrors& errors) {
  std::vector<std::string> out;
  for (const FieldError& e : errors.errors()) out.push_back(e.ToString());
  return out;
}

TEST(ValidationErrorsTest, NoErrorsIsOk) {
  ValidationErrors errors;
  {
    Scoped a(&errors, "a");
    Scoped i(&errors, size_t{3});
  }
  EXPECT_TRUE(errors.ok());
  EXPECT_EQ(errors.size(), 0u);
  EXPECT_TRUE(errors.ToStatus().ok());
}

TEST(ValidationErrorsTest, AnErrorAtTheRootHasNoPath) {
  ValidationErrors errors;
  errors.Add("config is empty");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors.errors()[0].path.empty());
  EXPECT_EQ(errors.errors()[0].Field(), "");
  EXPECT_EQ(errors.errors()[0].ToString(), "config is empty");
  EXPECT_EQ(errors.ToStatus(), absl::InvalidArgumentError("config is empty"));
}

TEST(ValidationErrorsTest, NestedScopesJoinWithDots) {
  ValidationErrors errors;
  Scoped policy(&errors, "default_policy");
  Scoped backoff(&errors, "backoff");
  Scoped cap(&errors, "cap");
  errors.Add("must be >= base (0.2s), got 0.1s");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].path,
              ElementsAre("default_policy", "backoff", "cap"));
  EXPECT_EQ(errors.errors()[0].ToString(),
            "default_policy.backoff.cap: must be >= base (0.2s), got 0.1s");
}

TEST(ValidationErrorsTest, ScopeExitRestoresTheParentPath) {
  ValidationErrors errors;
  Scoped breaker(&errors, "breaker");
  {
    Scoped window(&errors, "window");
    errors.Add("first");
  }
  errors.Add("second");
  {
    Scoped open_base(&errors, "open_base");
    errors.Add("third");
  }
  EXPECT_THAT(Lines(errors),
              ElementsAre("breaker.window: first", "breaker: second",
                          "breaker.open_base: third"));
}

TEST(ValidationErrorsTest, RepeatedFieldsGetBracketedIndices) {
  ValidationErrors errors;
  Scoped overrides(&errors, "overrides");
  for (size_t i = 0; i < 3; ++i) {
    Scoped index(&errors, i);
    if (i != 2) continue;
    Scoped policy(&errors, "policy");
    Scoped backoff(&errors, "backoff");
    errors.Add("bad");
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].path,
              ElementsAre("overrides", "[2]", "policy", "backoff"));
  EXPECT_EQ(errors.errors()[0].Field(), "overrides[2].policy.backoff");
}

TEST(ValidationErrorsTest, IndicesAtTheRootAndInARow) {
  ValidationErrors errors;
  {
    Scoped i(&errors, size_t{0});
    Scoped x(&errors, "x");
    errors.Add("a");
  }
  {
    Scoped m(&errors, "matrix");
    Scoped row(&errors, size_t{1});
    Scoped col(&errors, size_t{2});
    errors.Add("b");
  }
  EXPECT_THAT(Lines(errors), ElementsAre("[0].x: a", "matrix[1][2]: b"));
}

// Errors are data in the order found: not sorted by path, duplicates kept
// (de-duplication is the caller's decision).
TEST(ValidationErrorsTest, KeepsInsertionOrderAndDuplicates) {
  ValidationErrors errors;
  {
    Scoped z(&errors, "z");
    errors.Add("one");
  }
  {
    Scoped a(&errors, "a");
    errors.Add("two");
    errors.Add("two");
  }
  {
    Scoped z(&errors, "z");
    errors.Add("three");
  }
  EXPECT_THAT(Lines(errors),
              ElementsAre("z: one", "a: two", "a: two", "z: three"));
}

TEST(ValidationErrorsTest, AnErrorFromElsewhereGoesBelowTheCurrentPath) {
  ValidationErrors inner;
  {
    Scoped budget(&inner, "budget");
    Scoped ratio(&inner, "ratio");
    inner.Add("must be in [0, 10], got 11");
  }
  ValidationErrors outer;
  outer.Add(inner.errors()[0]);  // at the root: as it was
  {
    Scoped overrides(&outer, "overrides");
    Scoped index(&outer, size_t{1});
    Scoped policy(&outer, "policy");
    outer.Add(inner.errors()[0]);
  }
  EXPECT_THAT(Lines(outer),
              ElementsAre("budget.ratio: must be in [0, 10], got 11",
                          "overrides[1].policy.budget.ratio: must be in [0, "
                          "10], got 11"));
}

TEST(ValidationErrorsTest, StatusIsInvalidArgumentOneLinePerErrorInOrder) {
  ValidationErrors errors;
  {
    Scoped limits(&errors, "limits");
    {
      Scoped f(&errors, "max_key_bytes");
      errors.Add("must be in [1, 4096], got 0");
    }
    Scoped f(&errors, "max_batch_size");
    errors.Add("must be in [1, 100000], got 0");
  }
  errors.Add("at the root");
  const absl::Status s = errors.ToStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "limits.max_key_bytes: must be in [1, 4096], got 0\n"
            "limits.max_batch_size: must be in [1, 100000], got 0\n"
            "at the root");
}

TEST(FieldErrorTest, EqualityComparesPathAndMessage) {
  const FieldError a{{"limits", "max_key_bytes"}, "bad"};
  EXPECT_EQ(a, (FieldError{{"limits", "max_key_bytes"}, "bad"}));
  EXPECT_NE(a, (FieldError{{"limits", "max_key_bytes"}, "worse"}));
  EXPECT_NE(a, (FieldError{{"limits.max_key_bytes"}, "bad"}))
      << "same text, different structure";
}

}  // namespace
}  // namespace stagger::engine
