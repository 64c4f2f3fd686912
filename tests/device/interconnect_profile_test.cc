// The interconnect profiles' known answers (issue: the single-node article's
// table on an emulated 8-GPU box), on virtual time: one device-to-host copy
// takes the profile's time, two devices behind one switch take twice as
// long, an 8-device ring all-reduce takes 2 x 7/8 x bytes / the slowest
// ring link's rate; and the routes themselves.
#include "device/topology/interconnect_profile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "device/topology/emulated_interconnect.h"

namespace pstrain {
namespace {

const InterconnectProfile& Profile(const std::string& name) { return **FindInterconnectProfile(name); }

double SlowestLink(const InterconnectProfile& p, const std::vector<int>& path) {
  double slowest = 1e300;
  for (int l : path) slowest = std::min(slowest, p.links[l].bytes_per_second);
  return slowest;
}

// The links' names, each followed by a space.
std::string Route(const InterconnectProfile& p, const std::vector<int>& path) {
  std::string route;
  for (int l : path) route += p.links[l].name + " ";
  return route;
}

constexpr double kGB = 1e9;

TEST(InterconnectProfileTest, OneGigabyteDeviceToHostOverPcieTakesTheProfilesTime) {
  const InterconnectProfile& p = Profile("p100_pcie");
  const double t = ArrivalTimes(p.links, {{p.Path(0, kHostEndpoint), 1 * kGB}})[0];
  // PCIe 3.0 x16 as pinned copies reach it: 12 GB/s.
  EXPECT_NEAR(t, 1 * kGB / (12 * kGB), 0.1 * 1 / 12.0);
  // A device of the other socket crosses QPI too, which is faster: the same.
  EXPECT_NEAR(ArrivalTimes(p.links, {{p.Path(7, kHostEndpoint), 1 * kGB}})[0], t, 1e-9);
}

TEST(InterconnectProfileTest, TwoDevicesBehindOneSwitchTakeTwiceAsLongAsOne) {
  const InterconnectProfile& p = Profile("p100_pcie");
  const double one = ArrivalTimes(p.links, {{p.Path(0, kHostEndpoint), 1 * kGB}})[0];
  const std::vector<double> two =
      ArrivalTimes(p.links, {{p.Path(0, kHostEndpoint), 1 * kGB}, {p.Path(1, kHostEndpoint), 1 * kGB}});
  EXPECT_NEAR(two[0], 2 * one, 1e-9);
  EXPECT_NEAR(two[1], 2 * one, 1e-9);
  // Behind different switches they do not share the switch's uplink.
  const std::vector<double> apart =
      ArrivalTimes(p.links, {{p.Path(0, kHostEndpoint), 1 * kGB}, {p.Path(2, kHostEndpoint), 1 * kGB}});
  EXPECT_NEAR(apart[0], one, 1e-9);
}

TEST(InterconnectProfileTest, EightDeviceRingAllReduceTakesTwiceSevenEighthsOfTheBytesOverTheSlowestLink) {
  for (const std::string name : {"p100_pcie", "v100_nvlink"}) {
    const InterconnectProfile& p = Profile(name);
    const int64_t bytes = 100'000'000;
    const auto flows = RingAllReduceFlows(p, 8, bytes);
    ASSERT_EQ(flows.size(), 8u) << name;
    double slowest = 1e300;
    for (const auto& [path, b] : flows) slowest = std::min(slowest, SlowestLink(p, path));
    const std::vector<double> t = ArrivalTimes(p.links, flows);
    const double expected = 2.0 * 7 / 8 * bytes / slowest;
    EXPECT_NEAR(*std::max_element(t.begin(), t.end()), expected, 0.15 * expected) << name;
  }
  // PCIe's ring is held by the 12 GB/s links; NVLink's by one 25 GB/s link.
  const auto pcie = RingAllReduceFlows(Profile("p100_pcie"), 8, 100'000'000);
  EXPECT_NEAR(ArrivalTimes(Profile("p100_pcie").links, pcie)[0], 2.0 * 7 / 8 * 0.1 / 12, 1e-6);
}

TEST(InterconnectProfileTest, RoutesGoThroughSwitchesNotThroughOtherDevices) {
  const InterconnectProfile& pcie = Profile("p100_pcie");
  EXPECT_EQ(Route(pcie, pcie.Path(0, 1)), "device0->switch0 switch0->device1 ");  // peer to peer under one switch
  EXPECT_EQ(Route(pcie, pcie.Path(0, kHostEndpoint)), "device0->switch0 switch0->cpu0 cpu0->memory0 ");
  EXPECT_EQ(Route(pcie, pcie.Path(3, 4)), "device3->switch1 switch1->cpu0 cpu0->cpu1 cpu1->switch2 switch2->device4 ");
  const InterconnectProfile& nvlink = Profile("v100_nvlink");
  EXPECT_EQ(Route(nvlink, nvlink.Path(0, 4)), "device0->device4 ");    // NVLink neighbours
  EXPECT_DOUBLE_EQ(SlowestLink(nvlink, nvlink.Path(0, 4)), 50 * kGB);  // a doubled pair
  const std::string route = Route(nvlink, nvlink.Path(0, 5));
  EXPECT_EQ(route.find("device4"), std::string::npos) << route;  // not forwarded by device 4
  EXPECT_NE(route.find("switch"), std::string::npos) << route;
  // Every NVLink device uses six links' worth: 150 GB/s out.
  for (int d = 0; d < 8; ++d) {
    double out = 0;
    for (const Link& link : nvlink.links) {
      if (link.name.rfind("device" + std::to_string(d) + "->device", 0) == 0) out += link.bytes_per_second;
    }
    EXPECT_DOUBLE_EQ(out, 6 * 25 * kGB) << "device " << d;
  }
}

TEST(InterconnectProfileTest, RingsOverFewerDevicesKeepTheProfilesOrder) {
  const InterconnectProfile& nvlink = Profile("v100_nvlink");
  EXPECT_EQ(nvlink.Ring(8), (std::vector<int>{0, 1, 2, 3, 7, 6, 5, 4}));
  EXPECT_EQ(nvlink.Ring(4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(RingAllReduceFlows(nvlink, 1, 100).empty());
  EXPECT_FALSE(FindInterconnectProfile("dgx9").ok());
}

// On the real clock: a copy takes at least its modelled time (x the time
// scale), and a collective leaves its share of its time owed to the
// devices' compute. Only lower bounds: sleeps may run long on a busy machine.
TEST(EmulatedInterconnectTest, TakesAtLeastTheModelledTimeAndOwesComputeToCollectives) {
  const InterconnectProfile& p = Profile("p100_pcie");
  EmulatedInterconnect interconnect(p, 4, /*time_scale=*/2, /*collective_compute_share=*/0.5);
  const absl::Time start = absl::Now();
  interconnect.Transfer({{0, kHostEndpoint, 120'000'000}, {1, kHostEndpoint, 120'000'000}});  // 20 ms, x 2
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(39));
  EXPECT_EQ(interconnect.bytes_moved(), 240'000'000);
  const absl::Time ring_start = absl::Now();
  interconnect.RingAllReduce(80'000'000);  // 2 x 3/4 x 80 MB / 12 GB/s = 10 ms, x 2
  const absl::Duration ring = absl::Now() - ring_start;
  EXPECT_GE(ring, absl::Milliseconds(19));
  const absl::Duration owed = interconnect.TakeComputeDelay(3);
  EXPECT_GE(owed, absl::Milliseconds(9));
  EXPECT_LE(owed, ring * 0.5 + absl::Milliseconds(1));
  EXPECT_EQ(interconnect.TakeComputeDelay(3), absl::ZeroDuration());  // taken
  const absl::Time pass = absl::Now();
  interconnect.HostPass(768'000'000, 0);  // 10 ms at 76.8 GB/s, x 2
  EXPECT_GE(absl::Now() - pass, absl::Milliseconds(19));
}

}  // namespace
}  // namespace pstrain
