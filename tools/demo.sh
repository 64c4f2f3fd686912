#!/usr/bin/env bash
# Set up, build, and train the default experiment: 2 PS shards + 2 workers,
# synchronous updates, MLP on Fashion-MNIST, on loopback. Ends with the test
# accuracy and images/sec; result.json lands in runs/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/tools/setup.sh"
"$ROOT/tools/build.sh"
BUILD_DIR="${PSTRAIN_BUILD_DIR:-$ROOT/build}"
CONFIG="${1:-$ROOT/configs/fashion_mnist_mlp_sync.yaml}"
cd "$ROOT"
exec "$BUILD_DIR/bin/pstrain-launch" "$CONFIG"
