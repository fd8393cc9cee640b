// ListenScope: the words a program's first line uses for who can reach
// each of its addresses.
#include "core/cli/listen_scope.h"

#include "gtest/gtest.h"

namespace stagger::cli {
namespace {

TEST(ListenScope, LoopbackAddressesAreLoopbackOnly) {
  for (const char* a : {"127.0.0.1:50051", "127.0.0.1:0", "127.1.2.3:9464",
                        "localhost:9465", "[::1]:50051"}) {
    EXPECT_EQ(ListenScope(a), "loopback only") << a;
  }
}

TEST(ListenScope, WildcardAddressesAreAllInterfaces) {
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", ":50051", "*:9464"}) {
    EXPECT_EQ(ListenScope(a), "all interfaces") << a;
  }
}

TEST(ListenScope, AnyOtherHostIsThatInterfaceOnly) {
  EXPECT_EQ(ListenScope("10.0.0.7:50051"), "interface 10.0.0.7 only");
  EXPECT_EQ(ListenScope("[fd00::7]:50051"), "interface fd00::7 only");
  // A name that merely starts like a loopback address is not one.
  EXPECT_EQ(ListenScope("127.example.com:1"),
            "interface 127.example.com only");
}

TEST(ListenScope, UnixSocketsAreThisHostOnly) {
  EXPECT_EQ(ListenScope("unix:/run/stagger/agent.sock"),
            "this host only, a Unix socket");
  EXPECT_EQ(ListenScope("unix-abstract:stagger"),
            "this host only, a Unix socket");
}

TEST(DescribeListen, IsTheAddressAndItsScope) {
  EXPECT_EQ(DescribeListen("127.0.0.1:9464"), "127.0.0.1:9464 (loopback only)");
  EXPECT_EQ(DescribeListen("0.0.0.0:50051"), "0.0.0.0:50051 (all interfaces)");
}

}  // namespace
}  // namespace stagger::cli
