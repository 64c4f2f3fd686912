#!/usr/bin/env bash
# The module graph as the binaries show it (docs/ARCHITECTURE.md):
#   - pstrain-ps needs no GPU library and no oneDNN to start (a CPU-only PS
#     host or image carries none), in a CUDA build too;
#   - pstrain-worker contains no PS shard, pstrain-ps no model, layer,
#     strategy or device code.
# Usage: binary_dependencies_test.sh BIN_DIR
set -euo pipefail
bin="$1"
fail=0
ps_libs="$(ldd "$bin/pstrain-ps")"
for lib in libcudart libcublas libcublasLt libcudnn libnccl libdnnl libgloo libomp libgomp; do
  if grep -q "$lib" <<<"$ps_libs"; then
    echo "FAIL: pstrain-ps links $lib:"; grep "$lib" <<<"$ps_libs"; fail=1
  fi
done
worker_symbols="$(nm -C "$bin/pstrain-worker")"
if grep -q "PsShard" <<<"$worker_symbols"; then
  echo "FAIL: pstrain-worker contains PsShard:"; grep -m5 "PsShard" <<<"$worker_symbols"; fail=1
fi
ps_symbols="$(nm -C "$bin/pstrain-ps")"
for symbol in "pstrain::Layer::" "pstrain::ModelBuilder" "pstrain::DeviceContext" "pstrain::StrategyRegistry" \
              "pstrain::ReplicaSet"; do
  if grep -q "$symbol" <<<"$ps_symbols"; then
    echo "FAIL: pstrain-ps contains $symbol"; fail=1
  fi
done
# The checks must see something: the PS holds the shard, the worker the strategies.
grep -q "pstrain::PsShard" <<<"$ps_symbols" || { echo "FAIL: no PsShard in pstrain-ps (wrong binary?)"; fail=1; }
grep -q "pstrain::StrategyRegistry" <<<"$worker_symbols" || { echo "FAIL: no strategies in pstrain-worker"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: pstrain-ps links $(grep -c '=>' <<<"$ps_libs") libraries, none of them GPU or oneDNN; pstrain-worker has no PS shard"
exit "$fail"
