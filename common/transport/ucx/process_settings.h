// What the ucx transport reads from, and puts into, the process's
// environment. UCX reads its UCX_* settings from the environment, some of
// them once per process (at load time, or when the first context is made),
// so these are the process's, not one transport's.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pstrain::ucx {

// UCX's memory hooks (libucm, on by default) patch mmap underneath the
// sanitizers' own interceptors, and the first UCX thread created after
// ucp_init then recurses until its stack overflows. libucs reads UCX_MEM_*
// once, when it is loaded -- before any code of ours runs, so setting them
// from here (setenv, ucm_set_global_opts) is too late. In sanitizer builds
// the transport therefore refuses to start UCX unless the process was started
// with the hooks off (the ucx tests get the variables from ctest:
// tests/transport/CMakeLists.txt): FAILED_PRECONDITION saying so. OK in other
// builds.
absl::Status CheckMemoryHooksForSanitizers();

// The defaults pstrain wants for settings UCX reads from the environment,
// put there (never over the user's) by the first transport created in the
// process, before UCX reads them (ucp_config_modify does not reach the
// transports' and connection managers' own settings):
//   UCX_MM_ERROR_HANDLING=y  shared memory between processes of one host
//                            even though our endpoints ask for peer error
//                            handling (UCX 1.13 leaves it out otherwise);
//                            only peers in this network namespace get it
//                            (the network worker has no shared memory:
//                            TransportsWithoutSharedMemory);
//   UCX_TCP_CM_REUSEADDR=y   a listener may bind a port whose earlier
//                            connections linger in TIME_WAIT (a server
//                            restarted on its fixed port), as gRPC's may;
//   UCX_RNDV_SCHEME=get_zcopy  a large part is pulled by the receiver (RDMA
//                            read where a lane can; UCX's active-message
//                            pipeline where none can, as on shared memory
//                            with peer error handling). "auto" picks a
//                            fragment pipeline there that measured 2x
//                            slower (pstrain-bench ps, docs/BENCHMARKS.md).
//                            The network worker uses put_zcopy instead
//                            (NetworkRendezvousScheme);
//   UCX_TCP_TX_SEG_SIZE=UCX_TCP_RX_SEG_SIZE=kTcpSegmentSize  (only when the
//                            user set neither: UCX refuses a send segment
//                            larger than the receive one) the tcp lane
//                            sends and receives in pieces of 256 KiB, not
//                            UCX's 8 KiB and 64 KiB: a push+pull between
//                            emulated hosts gained 1.42x (pstrain-bench ps,
//                            docs/BENCHMARKS.md). Every pstrain process
//                            sets the same, so peers agree; a peer whose
//                            sends exceed this side's receive segment
//                            cannot talk to it.
// Once per process; later calls do nothing. Thread-safe.
void SetProcessDefaults();
inline constexpr char kTcpSegmentSize[] = "256k";

// UCX_RNDV_SCHEME for the engine's network worker: "put_zcopy" -- the
// sender writes a large part into the receiver's buffer (RDMA write; over
// tcp, the transports' zero-copy put, where no lane can read and
// get_zcopy falls back to UCX's active-message pipeline: measured about
// 10% more images/sec between emulated hosts, docs/BENCHMARKS.md) -- or
// empty when the user set UCX_RNDV_SCHEME, which then applies to both
// workers. After SetProcessDefaults.
std::string NetworkRendezvousScheme();

// UCX_TLS for the engine's network worker, which reaches peers outside this
// network namespace (engine.h: UCX 1.13's shared memory loses its wake-ups
// across network namespaces): `user_tls` (the environment's UCX_TLS; null
// or "all": every transport) without UCX's shared-memory transports (sm:
// posix, sysv, xpmem, cma, knem). "all" gives "^sm", a list of exclusions
// "^ud" gives "^ud,sm", a list of transports loses its shared-memory
// entries. Empty when the list has none to lose: one worker then serves
// every peer.
std::string TransportsWithoutSharedMemory(const char* user_tls);

// PSTRAIN_UCX_SPIN_US: microseconds the progress thread keeps polling after
// the last message or task before it sleeps on the event fd (default 200; 0:
// sleep at once, the least CPU on an idle link). A value that is not a
// number is ignored with a warning.
absl::Duration SpinFromEnvironment();

// PSTRAIN_UCX_RECEIVE_IN_PLACE: whether answers a call wants in place
// (CallOptions::receive_into) are received there (default 1; 0: into the
// transport's buffers, as before, for comparisons). Read once.
bool ReceiveInPlaceFromEnvironment();

}  // namespace pstrain::ucx
