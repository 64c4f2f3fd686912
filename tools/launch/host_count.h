// Counting the roles an experiment config asks for, without the config library.
//
// The launcher only needs to know how many PS shards and workers to start; full
// validation is left to the role binaries (which exit 2 on a bad config). The
// reader therefore looks at nothing but `cluster.ps_hosts` and
// `cluster.worker_hosts`.
#ifndef PSTRAIN_TOOLS_LAUNCH_HOST_COUNT_H_
#define PSTRAIN_TOOLS_LAUNCH_HOST_COUNT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::launch {

struct HostCounts {
  int num_ps = 0;       // entries of cluster.ps_hosts (0 is valid: allreduce)
  int num_workers = 0;  // entries of cluster.worker_hosts
};

// Reads `path` and counts its hosts. Files ending in .pbtxt, .textproto,
// .prototxt or .txtpb are protobuf text format; anything else is YAML.
// Errors (all InvalidArgument, message starting with the path): the file cannot
// be read, does not parse, `cluster`/`ps_hosts`/`worker_hosts` have the wrong
// shape, or no worker is listed (the launcher starts one process per host).
absl::StatusOr<HostCounts> CountHosts(const std::string& path);

// The two readers on text already in memory; `name` only labels messages.
// Neither requires a worker; CountHosts does.
absl::StatusOr<HostCounts> CountHostsInYaml(absl::string_view text, absl::string_view name);
// Counts `ps_hosts:` / `worker_hosts:` fields (a single string or a `[...]`
// list each) directly inside a top-level `cluster { ... }` (or `< ... >`)
// block. Scans tokens (strings, `#` comments, nesting) rather than parsing
// against the schema.
absl::StatusOr<HostCounts> CountHostsInTextProto(absl::string_view text, absl::string_view name);

}  // namespace pstrain::launch

#endif  // PSTRAIN_TOOLS_LAUNCH_HOST_COUNT_H_
