// An mpirun's --tag-output stream back into whole lines per rank
// (tools/launch/tagged_output.h), however Open MPI chunked it.
#include "tools/launch/tagged_output.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain::launch {
namespace {

TEST(TaggedOutputTest, WholeLinesOfEachRankGetTheirWorkerName) {
  TaggedOutput t("worker");
  EXPECT_EQ(t.Feed("[1,0]<stdout>:100\timages/sec: 9.0\n[1,1]<stdout>:100\timages/sec: 8.0\n"),
            "[worker0] 100\timages/sec: 9.0\n[worker1] 100\timages/sec: 8.0\n");
  EXPECT_EQ(t.Flush(), "");
}

// A rank's line that reached mpirun in two reads, another rank's between:
// each comes out whole, once its end has arrived.
TEST(TaggedOutputTest, ALineSplitAcrossChunksAndInterleavedComesOutWhole) {
  TaggedOutput t("worker");
  EXPECT_EQ(t.Feed("[1,0]<stdout>:900"), "");
  EXPECT_EQ(t.Feed("[1,1]<stdout>:300\timages/sec: 1\n"), "[worker1] 300\timages/sec: 1\n");
  EXPECT_EQ(t.Feed("[1,0]<stdout>:\timages/sec: 2\n[1,0]<stderr>:E boom\n"),
            "[worker0] 900\timages/sec: 2\n[worker0] E boom\n");
}

TEST(TaggedOutputTest, ATagCutBetweenChunksAndMpirunsOwnLines) {
  TaggedOutput t("worker");
  EXPECT_EQ(t.Feed("mpirun noticed something\n[1,1]<std"), "[mpirun] mpirun noticed something\n");
  EXPECT_EQ(t.Feed("out>:a [bracket] in a line\n"), "[worker1] a [bracket] in a line\n");
  EXPECT_EQ(t.Feed("[1,12]<stdout>:no end"), "");
  EXPECT_EQ(t.Flush(), "[worker12] no end\n");
}

}  // namespace
}  // namespace pstrain::launch
