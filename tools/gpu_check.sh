#!/usr/bin/env bash
# The GPU checks of docs/GPU.md in one run on a GPU machine, each step under
# its own time limit so a hang in one still leaves the others' results:
#   1. the machine (nvidia-smi, the bundle's library search)
#   2. pstrain vs PyTorch, ResNet-50 (tools/pytorch_compare.py; pstrain with
#      cuDNN's measured algorithms, PyTorch's step without optimizer as
#      pstrain-bench's), twice, each under half of the step's limit: fp32 as
#      each ships (--fp32_math tf32_convolutions: TF32 convolutions, strict
#      matmuls), then strict fp32 on both sides (--fp32_math strict)
#   3. the same in mixed precision, bf16 then fp16 (PyTorch autocast with
#      channels_last, pytorch_compare.py's default for them; fp16 with a
#      GradScaler), each under half of the step's limit
#   3b. "half": bf16 with 16-bit channels-last activations
#      (PSTRAIN_CUDA_ACTIVATIONS=half) against the same PyTorch run
#   4. PyTorch alone, whole steps with SGD momentum (fp32 as shipped,
#      strict, bf16), each under a third of the step's limit: what the
#      table's whole steps are compared with
#   5. pstrain-bench model with cuDNN's heuristic algorithms
#   6. the bundled tests (run_gpu_tests.sh)
#   7. the single-node tables (configs/compare/single_node_gpu.yaml, and
#      single_node_gpu_mixed.yaml: whole steps in fp32, bf16, fp16)
# Usage, from the root of a checkout on the GPU machine:
#   tools/gpu_check.sh BUNDLE.tar.xz OUTDIR [STEPS...]
# BUNDLE is tools/gpu_bundle.sh --gpu's archive; STEPS picks steps by name
# (machine, pytorch, mixed, half, momentum, heuristic, tests, table; default
# all). OUTDIR receives at most 12 files: check.log (everything printed),
# bench_pytorch_compare.json (fp32 as each ships),
# bench_pytorch_compare_strict.json (strict fp32),
# bench_pytorch_compare_bf16.json, bench_pytorch_compare_fp16.json,
# bench_pytorch_compare_bf16_half.json,
# bench_pytorch_momentum{,_strict,_bf16}.json, bench_heuristic.json,
# tests.tar.gz (every test log) and table.tar.gz (the table's results and
# logs). At the end tools/gpu_ratios.py prints every must-show ratio of the
# GPU issues against its goal. Limits in seconds (defaults: machine=30
# pytorch=180 mixed=180 half=90 momentum=120 heuristic=45 tests=150
# table=200):
# PSTRAIN_CHECK_LIMITS="pytorch=240 table=300 ...".
# PSTRAIN_CHECK_FASHION_MNIST=DIR: Fashion-MNIST's .gz files, installed at
# their Debian path for the tests when the machine lacks them.
# PSTRAIN_CHECK_TESTS="GLOB...": which bundled tests to run (default all).
# PSTRAIN_CHECK_TABLES="MATRIX.yaml...": which comparisons the table step
# runs (default the two above), each into table/<its name>/.
# Exits 0 when every step ran and passed, 1 otherwise.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '/^# Usage/,/^# Exits/p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUNDLE="$1" OUTDIR="$2"; shift 2
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(machine pytorch mixed half momentum heuristic tests table)
declare -A LIMIT=([machine]=30 [pytorch]=180 [mixed]=180 [half]=90 [momentum]=120 [heuristic]=45 [tests]=150
  [table]=200)
for kv in ${PSTRAIN_CHECK_LIMITS:-}; do LIMIT[${kv%%=*}]="${kv#*=}"; done
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
exec > >(tee -a "$OUTDIR/check.log") 2>&1

WORK="$(mktemp -d -t pstrain-gpu-check.XXXXXX)"
tar -xJf "$BUNDLE" -C "$WORK" || { echo "gpu_check: cannot unpack $BUNDLE"; exit 1; }
B="$WORK/pstrain-bundle"
# shellcheck source=/dev/null
source "$B/env.sh" || { echo "gpu_check: the bundle's libraries are not all found (above)"; exit 1; }
cd "$ROOT" || exit 1
failed=()

step_machine() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  grep -E '^(commit|cuda_needed|glibc_needed):' "$B/MANIFEST"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__,
                "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
}
# One tools/pytorch_compare.py run of ResNet-50 batch 64 (forward and
# backward, like pstrain-bench's step) under LIMIT seconds, its JSON into
# OUT and printed, then "LABEL: rc=..."; the further flags go to the script.
compare_resnet50() {
  local limit="$1" out="$2" label="$3" r
  shift 3
  timeout -k 5 "$limit" python3 tools/pytorch_compare.py --model resnet50 --batch_size 64 --steps 20 --warmup 5 \
    --optimizer none --pstrain_bin "$B" --json "$@" > "$out"
  r=$?
  cat "$out"
  echo "$label: rc=$r$([ $r -eq 124 ] && echo " (time limit $limit s)")"
  return $r
}
step_pytorch() {
  # fp32 as each ships (TF32 convolutions, strict matmuls), then strict fp32
  # on both sides, each under half of the step's limit (less the kill grace).
  local rc=0 each=$(((STEP_LIMIT - 10) / 2))
  compare_resnet50 "$each" "$OUTDIR/bench_pytorch_compare.json" "pytorch fp32 tf32_convolutions" \
    --fp32_math tf32_convolutions || rc=1
  compare_resnet50 "$each" "$OUTDIR/bench_pytorch_compare_strict.json" "pytorch fp32 strict" \
    --fp32_math strict || rc=1
  return $rc
}
step_momentum() {
  # PyTorch alone, a whole step with SGD momentum 0.9 (the table's steps are
  # pstrain's): fp32 as shipped, strict, bf16 with channels_last.
  local rc=0 r m out each=$(((STEP_LIMIT - 10) / 3))
  for m in fp32 strict bf16; do
    out="$OUTDIR/bench_pytorch_momentum.json"
    local flags=(--fp32_math tf32_convolutions)
    [ "$m" = strict ] && out="$OUTDIR/bench_pytorch_momentum_strict.json" && flags=(--fp32_math strict)
    [ "$m" = bf16 ] && out="$OUTDIR/bench_pytorch_momentum_bf16.json" && flags=(--precision bf16)
    timeout -k 5 "$each" python3 tools/pytorch_compare.py --model resnet50 --batch_size 64 --steps 20 --warmup 5 \
      --optimizer momentum --skip_pstrain --json "${flags[@]}" > "$out"
    r=$?
    cat "$out"
    echo "pytorch momentum $m: rc=$r$([ $r -eq 124 ] && echo " (time limit $each s)")"
    [ $r -eq 0 ] || rc=1
  done
  return $rc
}
step_mixed() {
  # Each precision under half of the step's limit (less the kill grace): a
  # hang in bf16 still leaves time for fp16. pstrain-bench gets --precision;
  # PyTorch runs channels_last (pytorch_compare.py's default for them).
  local rc=0 p each=$(((STEP_LIMIT - 10) / 2))
  for p in bf16 fp16; do
    compare_resnet50 "$each" "$OUTDIR/bench_pytorch_compare_$p.json" "mixed $p" --precision "$p" || rc=1
  done
  return $rc
}
step_half() {
  # bf16 with the activations kept in 16 bits, channels last, between layers.
  export PSTRAIN_CUDA_ACTIVATIONS=half
  compare_resnet50 "$((STEP_LIMIT - 10))" "$OUTDIR/bench_pytorch_compare_bf16_half.json" \
    "mixed bf16, 16-bit activations" --precision bf16
}
step_heuristic() {
  PSTRAIN_CUDNN_ALGORITHMS=heuristic "$B/run.sh" pstrain-bench model --device gpu --model resnet50 \
    --batch_size 64 --steps 20 --warmup 5 --json > "$OUTDIR/bench_heuristic.json"
  local rc=$?
  cat "$OUTDIR/bench_heuristic.json"
  return $rc
}
step_tests() {
  local rc=0 fm=/usr/share/datasets/fashion-mnist
  # The equivalence and cluster tests train on Fashion-MNIST at its Debian
  # path; a machine without the package gets the copy carried in
  # $PSTRAIN_CHECK_FASHION_MNIST (the four .gz files), when given.
  if [ ! -f "$fm/train-labels-idx1-ubyte.gz" ] && [ -n "${PSTRAIN_CHECK_FASHION_MNIST:-}" ]; then
    mkdir -p "$fm" && cp "$PSTRAIN_CHECK_FASHION_MNIST"/*.gz "$fm"/ && echo "tests: Fashion-MNIST copied to $fm"
  fi
  # shellcheck disable=SC2086  # a list of globs on purpose
  PSTRAIN_TEST_LOG_DIR="$WORK/tests" PSTRAIN_TEST_TIMEOUT=120 "$B/run_gpu_tests.sh" ${PSTRAIN_CHECK_TESTS:-} || rc=$?
  tar -czf "$OUTDIR/tests.tar.gz" -C "$WORK" tests
  return $rc
}
step_table() {
  local rc=0 m name
  for m in ${PSTRAIN_CHECK_TABLES:-configs/compare/single_node_gpu.yaml configs/compare/single_node_gpu_mixed.yaml}; do
    name="$(basename "$m" .yaml)"
    "$B/bin/pstrain-compare" "$m" --out "$WORK/table/$name" --bin_dir "$B/bin" || rc=$?
    cat "$WORK/table/$name/results.md" 2>/dev/null
  done
  tar -czf "$OUTDIR/table.tar.gz" -C "$WORK" table
  return $rc
}

for s in "${STEPS[@]}"; do
  [ -n "${LIMIT[$s]:-}" ] || { echo "gpu_check: unknown step '$s'"; failed+=("$s"); continue; }
  echo "===== $s (limit ${LIMIT[$s]} s) $(date -u +%H:%M:%S)"
  start=$SECONDS
  export -f "step_$s"
  STEP_LIMIT="${LIMIT[$s]}"
  export B OUTDIR WORK STEP_LIMIT
  timeout -k 5 "${LIMIT[$s]}" bash -c "step_$s"
  rc=$?
  echo "===== $s: rc=$rc after $((SECONDS - start)) s$([ $rc -eq 124 ] && echo ' (time limit)')"
  [ $rc -eq 0 ] || failed+=("$s")
done
# Every must-show ratio of the GPU issues from what the steps left in OUTDIR.
python3 tools/gpu_ratios.py "$OUTDIR"
echo "gpu_check: ${#STEPS[@]} steps, failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
