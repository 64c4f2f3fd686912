#!/usr/bin/env bash
# Configures and builds pstrain into ./build (or $PSTRAIN_BUILD_DIR).
# Usage: tools/build.sh [extra cmake -D options...]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=tools/ccache_env.sh
source "$ROOT/tools/ccache_env.sh"
# shellcheck source=tools/jobs.sh
source "$ROOT/tools/jobs.sh"
BUILD_DIR="${PSTRAIN_BUILD_DIR:-$ROOT/build}"
JOBS="$PSTRAIN_BUILD_JOBS"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${PSTRAIN_CCACHE_ARGS[@]}" "$@"
elif [ $# -gt 0 ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${PSTRAIN_CCACHE_ARGS[@]}" "$@"
fi
cmake --build "$BUILD_DIR" -j"$JOBS"
