// Pins gRPC's process-global callback completion queue for the whole test
// binary.
//
// gRPC (1.51, POSIX iomgr) serves the callback API -- which the grpc transport
// uses on both ends -- from one process-global, reference-counted completion
// queue polled by its own "nexting_thread"s. A channel takes a reference on
// its first callback call and drops it when destroyed; at zero gRPC shuts the
// queue down and deletes it while its polling threads may still use it. Tests
// that build and destroy a transport per case run that teardown again and
// again and, under load, abort inside gRPC ("ref_counted.h: assertion failed:
// prior > 0" or SIGSEGV in grpc_completion_queue_next, no pstrain frame on the
// stack). A real role keeps its channels for the whole process, so the tests
// do the same: one channel that has made a callback call is kept (leaked) for
// the binary's lifetime.
#pragma once

#include <memory>

#include "absl/time/clock.h"
#include "common/transport/grpc/grpc_transport.h"
#include "gtest/gtest.h"

namespace pstrain::testing_util {

class GrpcCallbackQueuePin : public ::testing::Environment {
 public:
  void SetUp() override {
    // Function-local statics: reachable for the whole run, so the leak
    // checker of sanitizer builds does not count them as lost.
    static Transport* const transport = CreateGrpcTransport(TransportOptions()).release();
    static Channel* const channel = [] {
      absl::StatusOr<std::unique_ptr<Channel>> connected = transport->Connect("127.0.0.1:1");
      if (!connected.ok()) return static_cast<Channel*>(nullptr);
      Channel* pinned = connected->release();
      CallOptions options;
      options.deadline = absl::Now() + absl::Milliseconds(200);
      // Fails (nothing listens on port 1); what matters is that the channel
      // made a callback call and so holds a reference on the queue.
      pinned->CallSync("Pin", OutgoingFrame(), options, nullptr).IgnoreError();
      return pinned;
    }();
    (void)channel;
  }
  // Never released: the queue is torn down (at most) once, at process exit.
};

inline ::testing::Environment* const kGrpcCallbackQueuePin =
    ::testing::AddGlobalTestEnvironment(new GrpcCallbackQueuePin);

}  // namespace pstrain::testing_util
