#!/usr/bin/env bash
# The analysis stages of CI, after the test suite (tools/test.sh runs this):
#   1. format:  every C++ file is formatted as .clang-format says, and no
#               non-test function is over 80 lines nor .cc file over 700
#               (tools/code_shape.py)
#   2. clang:   the whole tree with clang, -Wthread-safety -Werror (the
#               ABSL_GUARDED_BY annotations are checked), AddressSanitizer and
#               UndefinedBehaviorSanitizer; the unit tests run under them
#   3. fuzz:    each libFuzzer target the clang stage built (PSTRAIN_FUZZ;
#               docs/FUZZING.md) runs for $PSTRAIN_FUZZ_SECONDS (default 10)
#               on a scratch copy of its corpus; a crash, leak or timeout
#               fails, naming the target and the saved input
#   4. tsan:    the concurrent code (transports, PS, in-process clusters,
#               rendezvous store, collectives) under ThreadSanitizer
#   5. isa:     the tests whose results depend on the processor's kernels
#               (ctest label "numerics": layer gradients, models, equivalence,
#               precision) once more with oneDNN held to AVX2
#               (ONEDNN_MAX_CPU_ISA), on the main build, so an AVX-512
#               machine catches what fails on an AVX2 one;
#               PSTRAIN_ISA_LEVELS="AVX2 SSE41" adds the oldest level (about
#               2.5 minutes more, left out of CI for its time)
# Each sanitizer stage first runs a canary with a deliberate bug and insists
# on the report, so a stage that checks nothing fails.
#
# Usage: tools/check.sh [format|clang|fuzz|tsan|isa]...   (default: all five)
# Build directories: $PSTRAIN_CHECK_DIR (default build-check/) /clang and /tsan;
# the isa stage uses the main build ($PSTRAIN_BUILD_DIR, default build/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CHECK_DIR="${PSTRAIN_CHECK_DIR:-$ROOT/build-check}"
# shellcheck source=tools/ccache_env.sh
source "$ROOT/tools/ccache_env.sh"
# Compilers at once: one per core as memory allows (tools/jobs.sh); tests
# two at a time, as the suite (tools/test.sh).
# shellcheck source=tools/jobs.sh
source "$ROOT/tools/jobs.sh"
JOBS="$PSTRAIN_BUILD_JOBS"
TEST_JOBS="${PSTRAIN_TEST_JOBS:-2}"
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(format clang fuzz tsan isa)
CLANG_ARGS=(-G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo
            -DPSTRAIN_WERROR=ON -DPSTRAIN_BUILD_TESTS=ON "${PSTRAIN_CCACHE_ARGS[@]}")

say() { echo "check: $*"; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

# Runs the canary in `mode`; it must fail with a report matching `pattern`.
canary() {
  local bin="$1" mode="$2" pattern="$3" out rc=0
  out="$("$bin" "$mode" 2>&1)" || rc=$?
  if [ "$rc" -eq 0 ] || ! grep -q "$pattern" <<<"$out"; then
    say "FAILED: canary '$mode' (exit $rc) did not report '$pattern': the sanitizer is not checking"
    echo "$out" | tail -20
    exit 1
  fi
  say "canary '$mode' reported '$pattern' as it must"
}

stage_format() {
  local start; start=$(date +%s)
  local files; mapfile -t files < <(cd "$ROOT" && git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
  if ! (cd "$ROOT" && clang-format-14 --dry-run -Werror "${files[@]}"); then
    say "FAILED: files above are not formatted; run: clang-format-14 -i <file>"
    exit 1
  fi
  say "format: ${#files[@]} files formatted ($(elapsed "$start"))"
  # The shape a newcomer reads: no function over 80 lines, no .cc over 700,
  # no class over 40 methods, no two folders including each other.
  if ! (cd "$ROOT" && python3 tools/code_shape.py); then
    say "FAILED: the code shape above is over its limits (tools/code_shape.py says how to mend each)"
    exit 1
  fi
}

stage_clang() {
  local start; start=$(date +%s)
  local dir="$CHECK_DIR/clang"
  # PSTRAIN_FUZZ: coverage instrumentation, and bin/<name>_fuzz for the fuzz stage.
  cmake -S "$ROOT" -B "$dir" "${CLANG_ARGS[@]}" -DPSTRAIN_SANITIZE=address,undefined -DPSTRAIN_FUZZ=ON > /dev/null
  # The tests this stage runs, and through them every library and binary
  # (tests_unit: not the integration tests' and benchmarks' binaries, which
  # the gcc suite runs).
  cmake --build "$dir" -j"$JOBS" --target tests_unit
  say "clang: libraries, binaries and unit tests built with -Wthread-safety -Werror, ASan + UBSan ($(elapsed "$start"))"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1"
  export LSAN_OPTIONS="suppressions=$ROOT/tools/lsan.supp"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  canary "$dir/bin/sanitizer_canary" overflow "heap-buffer-overflow"
  "$dir/bin/sanitizer_canary" guarded
  # The unit tests: everything but the multi-process integration runs (their
  # roles are the same code), the benchmarks, and the training steps of the
  # larger zoo models (the same layers resnet50 and alexnet train through,
  # many times over; 2+ minutes under ASan). Binaries this stage does not
  # build appear to ctest as <name>_NOT_BUILT: left out too.
  (cd "$dir" && "$ROOT/tools/ctest_once_more.sh" -j"$TEST_JOBS" --timeout 900 --output-on-failure -LE 'integration|bench' \
     -E 'ZooTrainingTest[.].*/(resnet101|resnet152|vgg16|inception3)|_NOT_BUILT$')
  say "clang: unit tests passed under ASan + UBSan ($(elapsed "$start"))"
}

# The fuzz targets of tests/fuzz, each for $PSTRAIN_FUZZ_SECONDS on a scratch
# copy of its corpus (inputs it finds are not written into the repository).
# One summary line per target; a crash, leak or timeout (10 s per input) or
# more than 2 GiB of memory fails the stage, naming the target and the input
# saved under $CHECK_DIR/fuzz-artifacts/.
stage_fuzz() {
  local start; start=$(date +%s)
  local dir="$CHECK_DIR/clang" seconds="${PSTRAIN_FUZZ_SECONDS:-10}"
  # Every target tests/fuzz/CMakeLists.txt declares (one <name>_fuzz.cc each).
  local targets=() f t
  for f in "$ROOT"/tests/fuzz/*_fuzz.cc; do
    t="$(basename "$f" _fuzz.cc)"
    targets+=("$t")
  done
  for t in "${targets[@]}"; do
    if [ ! -x "$dir/bin/${t}_fuzz" ] || ! grep -q '^PSTRAIN_FUZZ:BOOL=ON' "$dir/CMakeCache.txt"; then
      say "FAILED: $dir/bin/${t}_fuzz is not a libFuzzer build: run the clang stage first"
      exit 1
    fi
  done
  local scratch artifacts="$CHECK_DIR/fuzz-artifacts"
  scratch="$(mktemp -d)"
  rm -rf "$artifacts" && mkdir -p "$artifacts"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
  export LSAN_OPTIONS="suppressions=$ROOT/tools/lsan.supp"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t"
    cp "$ROOT/tests/fuzz/corpus/$t/"* "$scratch/$t/"
    local log="$scratch/$t.log" rc=0
    (cd "$scratch" && "$dir/bin/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$scratch/$t" > "$log" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then
      local input; input="$(ls "$artifacts/$t-"* 2>/dev/null | head -1)"
      grep -E 'ERROR|fuzz check failed|runtime error|SUMMARY' "$log" | head -5
      say "FAILED: fuzz target $t (exit $rc): input saved at ${input:-<none>}; reproduce: $dir/bin/${t}_fuzz ${input:-}"
      say "        add it to tests/fuzz/corpus/$t/ as crash-<what> once fixed (docs/FUZZING.md); log: $log"
      exit 1
    fi
    # The last status line: "#N DONE cov: C ft: F corp: K/B ...".
    local line cov ft corp execs
    line="$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)"
    cov="$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<<"$line")"
    ft="$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<<"$line")"
    corp="$(sed -E 's/.*corp: ([0-9]+)\/([0-9]+[a-zA-Z]*).*/\1 inputs, \2/' <<<"$line")"
    execs="$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log")"
    say "fuzz: $t: ${execs:-?} exec/s, cov: ${cov:-?} ft: ${ft:-?}, corpus $corp (${seconds} s)"
  done
  rm -rf "$scratch"
  say "fuzz: ${#targets[@]} targets ran ${seconds} s each without a crash, leak or timeout ($(elapsed "$start"))"
}

# The abseil source of the installed version (cmake/tsan_absl.cmake).
absl_source() {
  local version dir="$CHECK_DIR/abseil-src"
  version="$(dpkg-query -W -f='${source:Upstream-Version}' libabsl-dev)"
  if [ -f "$dir/absl/synchronization/mutex.cc" ] && [ "$(cat "$dir/.version" 2>/dev/null)" = "$version" ]; then
    echo "$dir"; return
  fi
  local sources=/etc/apt/sources.list.d/pstrain-deb-src.sources sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    # The binary archives' entries, for sources (deb822 or one-line format).
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $sudo tee "$sources" > /dev/null
    else
      sources=/etc/apt/sources.list.d/pstrain-deb-src.list
      grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | $sudo tee "$sources" > /dev/null
    fi
    $sudo apt-get update -qq >&2
  fi
  local tmp; tmp="$(mktemp -d)"
  (cd "$tmp" && apt-get source --download-only -qq "abseil=$(dpkg-query -W -f='${source:Version}' libabsl-dev)" >&2)
  rm -rf "$dir" && mkdir -p "$dir"
  tar xzf "$tmp"/abseil_*.orig.tar.gz -C "$dir" --strip-components=1
  echo "$version" > "$dir/.version"
  rm -rf "$tmp"
  echo "$dir"
}

stage_tsan() {
  local start; start=$(date +%s)
  local dir="$CHECK_DIR/tsan" absl
  absl="$(absl_source)"
  cmake -S "$ROOT" -B "$dir" "${CLANG_ARGS[@]}" -DPSTRAIN_WITH_CUDA=OFF -DPSTRAIN_SANITIZE=thread \
        -DPSTRAIN_ABSL_SOURCE_DIR="$absl" > /dev/null
  # The binaries of the tests labelled "concurrent" (tests/*/CMakeLists.txt).
  cmake --build "$dir" -j"$JOBS" --target tests_concurrent
  say "tsan: built ($(elapsed "$start"))"
  # Lock order is absl's to check (tests/util/test_main.cc); TSan's own
  # detector stops at 64 held locks, and a PS push may hold one per variable.
  export TSAN_OPTIONS="suppressions=$ROOT/tools/tsan.supp:ignore_noninstrumented_modules=1:halt_on_error=1:detect_deadlocks=0"
  canary "$dir/bin/sanitizer_canary" race "data race"
  "$dir/bin/sanitizer_canary" guarded
  (cd "$dir" && "$ROOT/tools/ctest_once_more.sh" -j"$TEST_JOBS" --timeout 900 --output-on-failure -L concurrent)
  say "tsan: concurrent tests passed under ThreadSanitizer ($(elapsed "$start"))"
}

# The "numerics" tests with oneDNN's instruction set held below what this
# processor has: each level a processor in use may top out at (AVX2 EPYCs,
# SSE4.1 for the oldest). A level above the processor's changes nothing
# (oneDNN takes the lower of the two), so the stage says what it ran at.
# Tests that need a feature the cap removes (bf16) skip with the reason.
stage_isa() {
  local start; start=$(date +%s)
  local dir="${PSTRAIN_BUILD_DIR:-$ROOT/build}" isa
  if [ ! -f "$dir/CTestTestfile.cmake" ]; then
    say "FAILED: $dir holds no test build: run tools/build.sh -DPSTRAIN_BUILD_TESTS=ON first"
    exit 1
  fi
  for isa in ${PSTRAIN_ISA_LEVELS:-AVX2}; do
    (cd "$dir" && ONEDNN_MAX_CPU_ISA=$isa "$ROOT/tools/ctest_once_more.sh" -j"$TEST_JOBS" --timeout 900 \
       --output-on-failure -L numerics)
    say "isa: numerics tests passed with ONEDNN_MAX_CPU_ISA=$isa ($(elapsed "$start"))"
  done
}

for stage in "${STAGES[@]}"; do
  case "$stage" in
    format) stage_format ;;
    clang) stage_clang ;;
    fuzz) stage_fuzz ;;
    tsan) stage_tsan ;;
    isa) stage_isa ;;
    *) say "unknown stage '$stage' (format, clang, fuzz, tsan, isa)"; exit 2 ;;
  esac
done
