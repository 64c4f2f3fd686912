#!/usr/bin/env bash
# tools/gpu_ratios.py on a gpu_check.sh output folder made up here with
# known figures: each must-show line's ratio and verdict, "no result" for
# what is missing, and the exit status (0 all passed, 1 otherwise, 2 usage).
set -uo pipefail
ROOT="$1"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() { echo "gpu_ratios_test: $*"; exit 1; }
out="$T/out"
mkdir -p "$out" "$T/work/table/single_node_gpu" "$T/work/table/single_node_gpu_mixed"
compare() {  # FILE RATIO MEMORY PSTRAIN_RATE [ACTIVATIONS]
  printf '{"ratio": %s, "memory_ratio": %s, "pstrain": {"images_per_sec": %s, "activations": "%s"}, "pytorch": {"images_per_sec": 2000}}\n' \
    "$2" "$3" "$4" "${5:-float32}" > "$out/$1"
}
compare bench_pytorch_compare.json 0.95 1.1 1900
compare bench_pytorch_compare_strict.json 0.97 1.0 900
compare bench_pytorch_compare_bf16.json 0.91 1.25 2800
compare bench_pytorch_compare_fp16.json 0.5 1.0 1500
compare bench_pytorch_compare_bf16_half.json 0.96 0.62 2950 "bf16 nhwc"
printf '{"pytorch": {"images_per_sec": 2000}, "ratio": null}\n' > "$out/bench_pytorch_momentum.json"
printf '{"pytorch": {"images_per_sec": 1000}, "ratio": null}\n' > "$out/bench_pytorch_momentum_strict.json"
# bench_pytorch_momentum_bf16.json missing: its line has no result.
header="label,images_per_sec,status"
{
  echo "$header"
  echo "independent,1862,ok"
  echo "\"independent, strict fp32\",1010,ok"
  echo "parameter_server (cpu),1000,ok"
  echo "\"parameter_server (cpu), pipelined\",1700,ok"
  echo "replicated pscpu,1680,ok"
  echo "replicated none,,failed"
} > "$T/work/table/single_node_gpu/results.csv"
{ echo "$header"; echo "nccl bf16,2500,ok"; } > "$T/work/table/single_node_gpu_mixed/results.csv"
tar -czf "$out/table.tar.gz" -C "$T/work" table

got="$(python3 "$ROOT/tools/gpu_ratios.py" "$out")"
status=$?
echo "$got"
[ "$status" -eq 1 ] || fail "exit status $status with failures and missing figures, want 1"
expect() {  # LABEL_PREFIX REST_REGEX
  echo "$got" | grep -E "^$1 +$2" > /dev/null || fail "no line '$1 ... $2'"
}
expect "fwd\+bwd vs PyTorch, fp32 as each ships \(TF32 convolutions\)" "0\.950  \(goal >= 0\.90\)  PASS"
expect "fwd\+bwd vs PyTorch, strict fp32 \(TF32 off\)" "0\.970  \(goal >= 1\.00\)  FAIL"
expect "fwd\+bwd vs PyTorch, fp16" ".*0\.500  \(goal >= 0\.90\)  FAIL"
expect "peak device memory vs PyTorch, bf16" "1\.250  \(goal <= 1\.30\)  PASS"
expect "fwd\+bwd vs PyTorch, bf16 with 16-bit NHWC activations" "0\.960  \(goal >= 0\.90\)  PASS"
expect "peak device memory vs PyTorch, bf16 with 16-bit NHWC activations" "0\.620  \(goal <= 1\.30\)  PASS"
expect "whole step with momentum vs PyTorch, fp32 as each ships" "0\.931  \(goal >= 0\.90\)  PASS"
expect "whole step with momentum vs PyTorch, strict fp32" "1\.010  \(goal >= 1\.00\)  PASS"
expect "whole step with momentum vs PyTorch, bf16" "no result"
expect "whole step \(independent\) vs pstrain-bench forward\+backward, fp32" "0\.980  \(goal >= 0\.95\)  PASS"
expect "parameter_server \(cpu\) vs independent" "0\.537  \(goal >= 0\.90\)  FAIL"
expect "parameter_server \(cpu\), pipelined vs independent" "0\.913  \(goal >= 0\.90\)  PASS"
expect "replicated pscpu vs independent" "0\.902  \(goal >= 0\.90\)  PASS"
expect "replicated none vs independent" "no result"

# Every figure there and passing: exit 0 (an unpacked table/ folder too).
ok="$T/ok"
mkdir -p "$ok"
cp "$out"/*.json "$ok"/
compare bench_pytorch_compare_strict.json 1.02 1.0 900
compare bench_pytorch_compare_fp16.json 0.92 1.0 1500
cp "$out"/bench_pytorch_compare_strict.json "$out"/bench_pytorch_compare_fp16.json "$ok"/
printf '{"pytorch": {"images_per_sec": 2600}}\n' > "$ok/bench_pytorch_momentum_bf16.json"
cp -r "$T/work/table" "$ok/table"
sed -i 's/^replicated none,,failed$/replicated none,1800,ok/; s/^parameter_server (cpu),1000,ok$/parameter_server (cpu),1700,ok/' \
  "$ok/table/single_node_gpu/results.csv"
python3 "$ROOT/tools/gpu_ratios.py" "$ok" > "$T/ok.txt"
status=$?
[ "$status" -eq 0 ] || { cat "$T/ok.txt"; fail "exit status $status with every figure passing, want 0"; }
grep -c PASS "$T/ok.txt" | grep -qx 15 || { cat "$T/ok.txt"; fail "want 15 PASS lines"; }

# A half run that kept float32 activations is no figure of 16-bit ones.
compare bench_pytorch_compare_bf16_half.json 0.96 0.62 2950 float32
cp "$out"/bench_pytorch_compare_bf16_half.json "$ok"/
python3 "$ROOT/tools/gpu_ratios.py" "$ok" > "$T/float.txt"
[ $? -eq 1 ] || { cat "$T/float.txt"; fail "a half run with float32 activations: want exit status 1"; }
grep -q "ran with float32 activations, not bf16 nhwc: ignored" "$T/float.txt" || fail "no line naming the float32 run"
grep -E "^fwd\+bwd vs PyTorch, bf16 with 16-bit NHWC activations +no result" "$T/float.txt" > /dev/null ||
  fail "the float32 half run still gave a figure"

python3 "$ROOT/tools/gpu_ratios.py" "$T/none" 2> /dev/null
[ $? -eq 2 ] || fail "a folder that is not there: want exit status 2"
echo "gpu_ratios_test: ok"
