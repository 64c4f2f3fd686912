#include "tools/launch/host_count.h"

#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::launch {
namespace {

using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;

TEST(HostCountYamlTest, CountsBlockAndFlowLists) {
  auto counts = CountHostsInYaml(R"(
experiment: demo
cluster:
  ps_hosts:
    - "ps-a:2222"
    - ps-b:2222
  worker_hosts: [w0:2222, w1:2222, w2:2222]
model: {name: mlp}
)",
                                 "exp.yaml");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_ps, 2);
  EXPECT_EQ(counts->num_workers, 3);
}

TEST(HostCountYamlTest, MissingListsCountZero) {
  auto counts = CountHostsInYaml("cluster:\n  worker_hosts: [a:1]\n", "x.yaml");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_ps, 0);
  EXPECT_EQ(counts->num_workers, 1);

  counts = CountHostsInYaml("model: {name: mlp}\n", "x.yaml");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_ps, 0);
  EXPECT_EQ(counts->num_workers, 0);
}

TEST(HostCountYamlTest, WrongShapesAreErrorsNamingTheFile) {
  for (const char* text :
       {"cluster: [a, b]\n", "cluster:\n  ps_hosts: a:1\n", "- just\n- a list\n", "cluster: {ps_hosts: [a:1\n"}) {
    auto counts = CountHostsInYaml(text, "bad.yaml");
    ASSERT_FALSE(counts.ok()) << text;
    EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(counts.status().message().find("bad.yaml"), std::string::npos) << counts.status();
  }
}

TEST(HostCountTextProtoTest, CountsRepeatedFieldsAndLists) {
  auto counts = CountHostsInTextProto(R"pb(
                                        # comment mentioning ps_hosts: "nope"
                                        experiment: "demo"
                                        model { name: "mlp" hidden_units: 128 }
                                        cluster {
                                          ps_hosts: "ps-a:2222"
                                          ps_hosts: 'ps-b:2222'  # trailing comment
                                          worker_hosts: [ "w0:1", "w1:1", "w2:1" ]
                                          worker_hosts: "w3:1"
                                        }
                                      )pb",
                                      "exp.pbtxt");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_ps, 2);
  EXPECT_EQ(counts->num_workers, 4);
}

TEST(HostCountTextProtoTest, AngleBracketsColonAndEmptyList) {
  auto counts = CountHostsInTextProto("cluster: < ps_hosts: [] worker_hosts: \"a:1\" >\n", "exp.textproto");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_ps, 0);
  EXPECT_EQ(counts->num_workers, 1);
}

TEST(HostCountTextProtoTest, IgnoresSameNamesOutsideTopLevelCluster) {
  auto counts = CountHostsInTextProto(R"pb(
                                        other { cluster { worker_hosts: "x:1" } }
                                        note: "cluster { worker_hosts: \"y:1\" }"
                                        cluster { worker_hosts: "a:1" }
                                      )pb",
                                      "exp.pbtxt");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->num_workers, 1);
  EXPECT_EQ(counts->num_ps, 0);
}

TEST(HostCountTextProtoTest, MalformedInputIsAnErrorWithLocation) {
  for (const char* text : {"cluster { worker_hosts: \"a:1\"\n",  // missing '}'
                           "cluster { worker_hosts: \"a:1 }\n",  // unterminated string
                           "cluster { worker_hosts: a }\n",      // unquoted host
                           "cluster { worker_hosts: [\"a\" \"b\" }\n", "cluster }\n", "cluster: 3\n"}) {
    auto counts = CountHostsInTextProto(text, "bad.pbtxt");
    ASSERT_FALSE(counts.ok()) << text;
    EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(counts.status().message().find("bad.pbtxt"), std::string::npos) << counts.status();
  }
}

TEST(HostCountFileTest, PicksTheReaderByExtension) {
  TempDir dir;
  WriteFile(dir / "a.yaml", "cluster: {ps_hosts: [p:1], worker_hosts: [w:1, w:2]}\n");
  WriteFile(dir / "b.pbtxt", "cluster { ps_hosts: \"p:1\" worker_hosts: \"w:1\" }\n");
  WriteFile(dir / "c.prototxt", "cluster { worker_hosts: [\"w:1\", \"w:2\", \"w:3\"] }\n");
  auto a = CountHosts(dir / "a.yaml");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->num_ps, 1);
  EXPECT_EQ(a->num_workers, 2);
  auto b = CountHosts(dir / "b.pbtxt");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_ps, 1);
  EXPECT_EQ(b->num_workers, 1);
  auto c = CountHosts(dir / "c.prototxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_ps, 0);
  EXPECT_EQ(c->num_workers, 3);
}

TEST(HostCountFileTest, UnreadableOrWorkerlessConfigsAreErrorsNamingTheFile) {
  TempDir dir;
  WriteFile(dir / "noworkers.yaml", "cluster: {ps_hosts: [p:1]}\n");
  for (const std::string& path : {dir / "missing.yaml", dir.path(), dir / "noworkers.yaml"}) {
    auto counts = CountHosts(path);
    ASSERT_FALSE(counts.ok()) << path;
    EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(counts.status().message().rfind(path, 0), 0u) << counts.status();
  }
}

}  // namespace
}  // namespace pstrain::launch
