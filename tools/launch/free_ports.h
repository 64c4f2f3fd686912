// Choosing TCP ports for a one-machine cluster.
#ifndef PSTRAIN_TOOLS_LAUNCH_FREE_PORTS_H_
#define PSTRAIN_TOOLS_LAUNCH_FREE_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launch {

// Returns `n` distinct TCP ports that were free on 127.0.0.1 when chosen: each
// comes from binding a socket to 127.0.0.1:0; all sockets stay open until every
// port is chosen (so the kernel cannot hand out one twice) and are closed
// before returning. Another process may still take a port before the roles
// bind it; that window is inherent and short. n == 0 returns an empty list.
// Errors: Internal naming the failing socket call.
absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n);

}  // namespace pstrain::launch

#endif  // PSTRAIN_TOOLS_LAUNCH_FREE_PORTS_H_
