// core/http/json: proto messages print with the .proto field names and
// every field; strings escape what JSON needs and survive bad UTF-8;
// members added to an object keep it valid JSON (checked by parsing it back
// with protobuf's own JSON parser).
#include "core/http/json.h"

#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::http {
namespace {

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct out;
  const auto s = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(s.ok()) << s.ToString() << " in " << json;
  return out;
}

TEST(JsonTest, ProtoJsonUsesProtoFieldNamesAndPrintsDefaults) {
  v1::ListEndpointsResponse r;
  r.add_endpoints()->set_endpoint("a");
  const std::string json = ProtoJson(r, /*indent=*/false);
  EXPECT_TRUE(absl::StrContains(json, "\"total_tracked\":\"0\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"next_page_token\":\"\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"breaker_state\":\"BREAKER_STATE_UNSPECIFIED\""))
      << json;
  EXPECT_FALSE(absl::StrContains(json, "totalTracked"));
  EXPECT_TRUE(absl::StrContains(ProtoJson(r, /*indent=*/true), "\n"));
}

TEST(JsonTest, JsonStringEscapes) {
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("\n\x01\x7f"), "\"\\u000a\\u0001\\u007f\"");
  EXPECT_EQ(JsonString("\xC3\xA9</script>"), "\"\xC3\xA9</script>\"");
  EXPECT_EQ(JsonString("a\xff" "b\xC3"), "\"a\\ufffdb\\ufffd\"");
  const google::protobuf::Struct s =
      Parse("{\"k\":" + JsonString("x\"\\\n\xff\xC3\xA9") + "}");
  EXPECT_EQ(s.fields().at("k").string_value(), "x\"\\\n\xEF\xBF\xBD\xC3\xA9");
}

TEST(JsonTest, WithMembersKeepsTheObjectValid) {
  v1::ListEndpointsResponse r;
  for (bool indent : {false, true}) {
    const google::protobuf::Struct s = Parse(WithMembers(
        ProtoJson(r, indent), {{"scanned", "5"}, {"filter", JsonString("all")}}));
    EXPECT_EQ(s.fields().at("scanned").number_value(), 5);
    EXPECT_EQ(s.fields().at("filter").string_value(), "all");
    EXPECT_TRUE(s.fields().contains("total_tracked"));
  }
  EXPECT_EQ(WithMembers("{}", {{"a", "1"}}), "{\"a\":1}");
  EXPECT_EQ(WithMembers("{\n}", {{"a", "1"}, {"b", "2"}}), "{\n\"a\":1,\"b\":2}");
}

TEST(JsonTest, JsonErrorIsOneMember) {
  const google::protobuf::Struct s = Parse(JsonError("bad \"thing\""));
  EXPECT_EQ(s.fields().at("error").string_value(), "bad \"thing\"");
}

}  // namespace
}  // namespace stagger::http
