#!/usr/bin/env bash
# The whole test suite from a bare Debian machine: install dependencies,
# build, run every test (ctest), then the analysis stages (tools/check.sh).
# Exits non-zero if anything fails. Arguments go to ctest (and skip the
# analysis stages).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/tools/setup.sh"
"$ROOT/tools/build.sh" -DPSTRAIN_BUILD_TESTS=ON
BUILD_DIR="${PSTRAIN_BUILD_DIR:-$ROOT/build}"
cd "$BUILD_DIR"
# Two at a time: the machine has two cores, and multi-process tests bring
# their own cluster.
ctest --output-on-failure -j "${PSTRAIN_TEST_JOBS:-2}" --timeout 900 "$@"
# Then the analysis stages: format, the clang thread-safety build with ASan +
# UBSan, ThreadSanitizer (PSTRAIN_SKIP_CHECKS=1 skips them, e.g. while
# iterating on a test).
if [ "${PSTRAIN_SKIP_CHECKS:-0}" != 1 ] && [ $# -eq 0 ]; then
  "$ROOT/tools/check.sh"
fi
