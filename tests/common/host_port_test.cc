// The one host:port parser and formatter (common/host_port.h). The error
// texts are also checked through cluster validation (tests/config).
#include "common/host_port.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TEST(HostPortTest, ParsesNamesAddressesAndBracketedIpv6) {
  absl::StatusOr<HostPort> name = ParseHostPort("ps-0.cluster.local:2222");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->host, "ps-0.cluster.local");
  EXPECT_EQ(name->port, 2222);
  EXPECT_FALSE(name->is_ipv6());
  absl::StatusOr<HostPort> v6 = ParseHostPort("[fe80::1%eth0]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fe80::1%eth0");
  EXPECT_EQ(v6->port, 65535);
  EXPECT_TRUE(v6->is_ipv6());
}

TEST(HostPortTest, FormatsBackAndListensOnEveryInterfaceOfTheSameFamily) {
  EXPECT_EQ(ParseHostPort("10.0.0.7:80")->ToString(), "10.0.0.7:80");
  EXPECT_EQ(ParseHostPort("[::1]:5000")->ToString(), "[::1]:5000");
  EXPECT_EQ(ParseHostPort("worker-1:2223")->AnyInterface(), "0.0.0.0:2223");
  EXPECT_EQ(ParseHostPort("[::1]:5000")->AnyInterface(), "[::]:5000");
}

TEST(HostPortTest, ListenSettingsPickEveryInterfaceTheClusterHostOrTheGivenOne) {
  const HostPort v4 = *ParseHostPort("10.0.0.7:2222");
  const HostPort v6 = *ParseHostPort("[fd00::7]:2222");
  EXPECT_EQ(ListenAddress("", v4), "0.0.0.0:2222");
  EXPECT_EQ(ListenAddress("", v6), "[::]:2222");
  EXPECT_EQ(ListenAddress("cluster", v4), "10.0.0.7:2222");
  EXPECT_EQ(ListenAddress("cluster", v6), "[fd00::7]:2222");
  EXPECT_EQ(ListenAddress("192.168.1.3", v4), "192.168.1.3:2222");
  EXPECT_EQ(ListenAddress("::1", v4), "[::1]:2222");
  EXPECT_EQ(ListenHost("", v4), "0.0.0.0");
  EXPECT_EQ(ListenHost("cluster", v6), "fd00::7");
  for (const char* good : {"", "cluster", "10.0.0.5", "::1", "fd00::7", "node-3.internal"}) {
    EXPECT_TRUE(CheckListenSetting(good).ok()) << good << ": " << CheckListenSetting(good);
  }
  struct Bad {
    const char* setting;
    const char* why;
  };
  for (const Bad& bad : {Bad{"10.0.0.5:2222", "has a port"}, Bad{"[::1]", "without brackets"},
                         Bad{"a b", "is not a host name or address"}}) {
    absl::Status s = CheckListenSetting(bad.setting);
    EXPECT_TRUE(absl::StrContains(s.message(), bad.why)) << bad.setting << ": " << s;
  }
}

TEST(HostPortTest, RejectsWhatNoRoleCouldUse) {
  struct Bad {
    const char* text;
    const char* why;
  };
  for (const Bad& bad :
       {Bad{"", "it is empty"}, Bad{"host", "no ':port'"}, Bad{":80", "the host is empty"},
        Bad{"h:", "the port is empty"}, Bad{"h:0", "out of range 1..65535"}, Bad{"h:65536", "out of range 1..65535"},
        Bad{"h:8a", "is not a number"}, Bad{"::1:80", "an IPv6 address needs brackets"},
        Bad{"[::1:80", "no closing ']'"}, Bad{"[::1]80", "no ':port' after the ']'"},
        Bad{"[host]:80", "is not an IPv6 address"}, Bad{"a b:80", "is not a host name or address"}}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(bad.text);
    ASSERT_FALSE(parsed.ok()) << bad.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(bad.why)) << bad.text;
  }
}

}  // namespace
}  // namespace pstrain
