// Where an emulated cluster puts each role (no root needed).
#include "tools/launch/emulated_cluster.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::launch {
namespace {

using ::testing::ElementsAre;

TEST(PlaceRoles, WorkersFillHostsPsSeparateOrColocated) {
  EmulatedLayout layout;
  layout.num_ps = 2;
  layout.num_workers = 8;
  layout.workers_per_host = 2;
  layout.server_hosts = 2;
  RolePlacement separate = PlaceRoles(layout);
  EXPECT_THAT(separate.worker_host, ElementsAre(0, 0, 1, 1, 2, 2, 3, 3));
  EXPECT_THAT(separate.ps_host, ElementsAre(4, 5));
  EXPECT_EQ(separate.num_hosts, 6);
  layout.server_hosts = 0;
  RolePlacement colocated = PlaceRoles(layout);
  EXPECT_THAT(colocated.ps_host, ElementsAre(0, 1));
  EXPECT_EQ(colocated.num_hosts, 4);
  // A last host with fewer workers.
  layout.num_workers = 3;
  layout.num_ps = 5;
  RolePlacement uneven = PlaceRoles(layout);
  EXPECT_THAT(uneven.worker_host, ElementsAre(0, 0, 1));
  EXPECT_THAT(uneven.ps_host, ElementsAre(0, 1, 0, 1, 0));
  EXPECT_EQ(uneven.num_hosts, 2);
}

// BytePS's layout with CPU servers: shards on the worker hosts and on hosts
// that run only shards.
TEST(PlaceRoles, ServerHostsBesideColocatedShards) {
  EmulatedLayout layout;
  layout.num_ps = 6;
  layout.num_workers = 4;
  layout.workers_per_host = 1;
  layout.server_hosts = 2;
  RolePlacement mixed = PlaceRoles(layout);
  EXPECT_THAT(mixed.worker_host, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(mixed.ps_host, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(mixed.num_hosts, 6);
  layout.num_ps = 3;
  RolePlacement fewer = PlaceRoles(layout);
  EXPECT_THAT(fewer.ps_host, ElementsAre(0, 4, 5));
  EXPECT_EQ(fewer.num_hosts, 6);
}

}  // namespace
}  // namespace pstrain::launch
