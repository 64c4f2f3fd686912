// Running the variants of a comparison one after another through
// pstrain-launch (docs/COMPARE.md). Each variant runs as
//   pstrain-launch OUT/<nn>-<slug>/config.yaml --run_dir OUT/<nn>-<slug> [--timeout_s N]
// with its output in launch.log of its run directory; its result comes from
// that run's result.json only, never from the launcher's output.
//
// Interrupts: after InstallSignalForwarding, SIGINT, SIGTERM and SIGHUP are
// forwarded to the running launcher (which runs in its own process group, so
// a Ctrl-C reaches it once, not twice: a second signal makes it SIGKILL its
// roles), and the variants not yet started are not run. The handlers and the
// state they share belong to the process: install them once, from the
// thread that runs the variants.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/compare/matrix.h"
#include "tools/compare/report.h"

namespace pstrain::compare {

struct RunSettings {
  std::string launch;   // the pstrain-launch executable
  std::string out_dir;  // holds every variant's directory
  int timeout_s = 0;    // each variant's --timeout_s; 0: none
  // --byte_scale of the variants of device emulated (common/config/byte_scale.h).
  double byte_scale = 1;
};

// Forwards SIGINT, SIGTERM and SIGHUP as above; restores SIGCHLD's default so
// the launcher's exit code can be waited for.
void InstallSignalForwarding();

// The first signal received since InstallSignalForwarding, 0 when none.
int ReceivedSignal();

// Runs every variant of `matrix` (prepared: PrepareVariants) in order,
// writing "[i/n] <label> ... <status line>" to `out` for each and keeping
// OUT/results.csv current after each, so an interrupted comparison leaves
// what it measured. Once a signal has arrived, the remaining variants are
// recorded as "not run: interrupted" (exit code -1). A variant failed when
// the launcher could not be started (exit code -1), exited non-zero (its
// error: the launcher's last "launch: " line) or left no readable
// result.json.
std::vector<VariantOutcome> RunVariants(const Matrix& matrix, const RunSettings& settings, std::ostream& out);

}  // namespace pstrain::compare
