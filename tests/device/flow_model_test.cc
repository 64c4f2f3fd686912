// FlowModel on virtual time: known answers of links shared by flows.
#include "device/topology/flow_model.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

TEST(FlowModelTest, OneFlowTakesBytesOverRate) {
  const std::vector<double> t = ArrivalTimes({{"a", 100}}, {{{0}, 250}});
  EXPECT_DOUBLE_EQ(t[0], 2.5);
}

TEST(FlowModelTest, TheSlowestLinkOfAPathSetsTheRate) {
  const std::vector<double> t = ArrivalTimes({{"fast", 100}, {"slow", 10}}, {{{0, 1}, 50}});
  EXPECT_DOUBLE_EQ(t[0], 5);
}

TEST(FlowModelTest, TwoFlowsThroughOneLinkTakeTwiceAsLong) {
  const std::vector<double> t = ArrivalTimes({{"a", 100}}, {{{0}, 100}, {{0}, 100}});
  EXPECT_DOUBLE_EQ(t[0], 2);
  EXPECT_DOUBLE_EQ(t[1], 2);
}

TEST(FlowModelTest, MaxMinFairShareLeavesUnusedRateToOthers) {
  // B is held to 2 by its second link, so A gets the other 8 of link 0.
  FlowModel model({{"shared", 10}, {"narrow", 2}});
  const FlowModel::FlowId a = model.Start({0}, 1000, 0);
  const FlowModel::FlowId b = model.Start({0, 1}, 1000, 0);
  EXPECT_DOUBLE_EQ(model.Rate(a), 8);
  EXPECT_DOUBLE_EQ(model.Rate(b), 2);
}

TEST(FlowModelTest, AFlowThatEndsSpeedsUpTheOthers) {
  // Both at 5 until the short one ends at t = 2 (10 bytes); the long one
  // has 90 left at 10 bytes/s: 11 in all.
  const std::vector<double> t = ArrivalTimes({{"a", 10}}, {{{0}, 10}, {{0}, 100}});
  EXPECT_DOUBLE_EQ(t[0], 2);
  EXPECT_NEAR(t[1], 11, 1e-9);
}

TEST(FlowModelTest, AFlowStartedLaterSharesFromThen) {
  FlowModel model({{"a", 10}});
  const FlowModel::FlowId first = model.Start({0}, 100, 0);
  model.Advance(5);  // 50 moved alone
  const FlowModel::FlowId second = model.Start({0}, 25, 5);
  EXPECT_DOUBLE_EQ(model.Rate(first), 5);
  EXPECT_DOUBLE_EQ(model.NextArrival(), 10);  // the second: 25 at 5/s
  model.Advance(10);
  EXPECT_TRUE(model.Done(second));
  EXPECT_FALSE(model.Done(first));
  EXPECT_DOUBLE_EQ(model.NextArrival(), 12.5);  // 25 left alone at 10/s
}

TEST(FlowModelTest, EmptyPathsAndZeroBytesArriveAtOnce) {
  FlowModel model({{"a", 10}});
  EXPECT_TRUE(model.Done(model.Start({}, 100, 0)));
  EXPECT_TRUE(model.Done(model.Start({0}, 0, 0)));
  EXPECT_EQ(model.in_flight(), 0);
}

}  // namespace
}  // namespace pstrain
