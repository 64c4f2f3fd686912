// InprocTransport: every role in one process, for tests.
//
// Servers register under their address string inside this object; channels
// look them up at call time (so a channel may be created before its server,
// as with gRPC). Frames are handed over without copying. A call whose handler
// has not answered by the deadline completes with DEADLINE_EXCEEDED; a late
// answer is then discarded. Share one instance between all in-process roles.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/transport/transport.h"

namespace pstrain {

class InprocTransport : public Transport {
 public:
  InprocTransport();
  ~InprocTransport() override;

  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override;
  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override;

  // Calls whose deadline the transport still watches: those with a deadline
  // not answered yet (an answered call's is dropped at once, so its memory
  // does not wait for its deadline).
  int watched_deadlines() const;

  struct State;  // shared with channels and servers

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pstrain
