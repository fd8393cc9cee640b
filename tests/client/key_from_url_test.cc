// EndpointKeyFromUrl (client/key_from_url.h): what a key keeps and what it
// never keeps (userinfo, query, fragment), as a table; and every refusal.
#include "client/key_from_url.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::client {
namespace {

using ::testing::HasSubstr;

struct KeyCase {
  const char* url;
  int segments;
  const char* key;
};

TEST(EndpointKeyTest, KeepsOnlyWhatIdentifiesTheDestination) {
  const std::vector<KeyCase> cases = {
      {"https://hooks.example.com/services/T0/B0/XXXX", 0,
       "https://hooks.example.com"},
      {"https://hooks.example.com/services/T0/B0/XXXX", 1,
       "https://hooks.example.com/services"},
      {"https://hooks.example.com/services/T0/B0/XXXX", 2,
       "https://hooks.example.com/services/T0"},
      {"https://hooks.example.com/a", 5, "https://hooks.example.com/a"},
      {"https://bot:s3cret@Hooks.Example.COM:443/services/T0?sig=abc#frag", 1,
       "https://hooks.example.com/services"},
      {"HTTPS://user@host.example/x", 0, "https://host.example"},
      {"http://host.example:80/x", 1, "http://host.example/x"},
      {"http://host.example:8080/x", 0, "http://host.example:8080"},
      {"https://host.example:80/", 0, "https://host.example:80"},
      {"https://host.example?token=1", 3, "https://host.example"},
      {"https://host.example#token", 3, "https://host.example"},
      {"https://host.example/a?b/c", 3, "https://host.example/a"},
      {"https://host.example//a///b/", 2, "https://host.example/a/b"},
      {"https://a:b@c@host.example/p", 0, "https://host.example"},
      {"https://[2001:DB8::1]:8443/p", 1, "https://[2001:db8::1]:8443/p"},
      {"https://[::1]/p", 0, "https://[::1]"},
      {"grpc+tls://svc.internal:50051/x", 0, "grpc+tls://svc.internal:50051"},
      {"https://host.example/a%2Fb/c", 1, "https://host.example/a%2Fb"},
      {"https://host.example:/a", 0, "https://host.example"},  // RFC 3986: empty port
  };
  for (const KeyCase& c : cases) {
    absl::StatusOr<std::string> key = EndpointKeyFromUrl(c.url, c.segments);
    ASSERT_TRUE(key.ok()) << c.url << ": " << key.status();
    EXPECT_EQ(*key, c.key) << c.url << " segments=" << c.segments;
  }
}

TEST(EndpointKeyTest, NeverKeepsSecrets) {
  const std::string url =
      "https://user:PASSWORD@hooks.example.com/a/b?QUERY=1#FRAGMENT";
  for (int n = 0; n <= kMaxPathSegments; ++n) {
    absl::StatusOr<std::string> key = EndpointKeyFromUrl(url, n);
    ASSERT_TRUE(key.ok());
    for (const char* secret : {"user", "PASSWORD", "QUERY", "FRAGMENT", "@",
                               "?", "#"}) {
      EXPECT_THAT(*key, ::testing::Not(HasSubstr(secret))) << n;
    }
  }
}

struct BadCase {
  const char* url;
  int segments;
  const char* error;
};

TEST(EndpointKeyTest, Refusals) {
  const std::string huge = "https://h/" + std::string(kMaxUrlBytes, 'a');
  const std::vector<BadCase> cases = {
      {"hooks.example.com/a", 0, "not an absolute URL"},
      {"://host/a", 0, "bad scheme"},
      {"1http://host/a", 0, "bad scheme"},
      {"ht_tp://host/a", 0, "bad scheme"},
      {"https:///a", 0, "no host"},
      {"https://user@/a", 0, "no host"},
      {"https://host:0/a", 0, "port must be a number"},
      {"https://host:65536/a", 0, "port must be a number"},
      {"https://host:8x/a", 0, "port must be a number"},
      {"https://[::1/a", 0, "unclosed '['"},
      {"https://[::1]x/a", 0, "junk after the IPv6 host"},
      {"https://host/a b", 0, "control character or space"},
      {"https://host/a\n", 0, "control character or space"},
      {"https://host/a", -1, "path_segments: must be in 0..16"},
      {"https://host/a", kMaxPathSegments + 1, "path_segments"},
      {huge.c_str(), 0, "over the limit"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<std::string> key = EndpointKeyFromUrl(c.url, c.segments);
    ASSERT_FALSE(key.ok()) << c.url;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(key.status().message()), HasSubstr(c.error))
        << c.url;
  }
}

}  // namespace
}  // namespace stagger::client
