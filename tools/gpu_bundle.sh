#!/usr/bin/env bash
# Packs built pstrain executables and the shared libraries they need into one
# archive for a GPU machine that has the NVIDIA libraries but none of
# pstrain's build dependencies (docs/GPU.md).
#
# Usage: tools/gpu_bundle.sh [--build-dir DIR] [--output FILE] [--max-mib N]
#                            [--gpu | --tests-only | --tools-only] [PATTERN...]
#   --build-dir  build tree to pack (default: $PSTRAIN_BUILD_DIR or ./build)
#   --output     archive to write (default: gpu-bundle.tar.xz in the
#                repository root, git-ignored); the suffix
#                picks the compressor: .tar.xz (xz -9), .tar.zst (zstd -19),
#                .tar.gz (gzip -9). xz is the default because the GPU machine
#                surely reads it (tar + xz, or python3 -m tarfile); zstd may be
#                missing there.
#   --max-mib    fail when the archive is larger (default 64, or
#                $PSTRAIN_BUNDLE_MAX_MIB: the most a remote GPU run takes
#                beside the working tree)
#   --gpu        the executables meant for the GPU run: pstrain-* tools and
#                the models_*, worker_*, local_reduce* and
#                *cuda*/*gpu*/*nccl*/*allocator* binaries
#   --tests-only *_test binaries;  --tools-only  pstrain-* tools
#   PATTERN      shell globs on executable names, added to the above; with no
#                selection at all, every executable in bin/ is packed.
#
# The archive holds one directory, pstrain-bundle/:
#   bin/               the selected executables, debug info stripped (symbol
#                      tables kept so glog stack traces stay readable)
#   lib/               every library ldd resolves for them, except the CUDA
#                      family (cudart, cuBLAS, cuDNN, NCCL, ...) and the glibc
#                      core, which the GPU machine provides; libgomp included
#   lib/gcc/           libstdc++ and libgcc_s, used where the local glibc is
#                      new enough for them (else the system's copies)
#   env.sh             sourced by the scripts below (or by you): sets
#                      LD_LIBRARY_PATH to lib/ plus the directories where the
#                      needed CUDA libraries are found, and PSTRAIN_BIN_DIR
#   run.sh NAME ARGS   runs bin/NAME with that environment
#   run_gpu_tests.sh   runs every bundled *_test with --gtest_brief=1 and
#                      prints a summary (ctest cannot be used: CTestTestfile
#                      paths are absolute to the build machine)
#   MANIFEST           what was packed, from which commit, what it needs
# Exits 1 on failure (missing build, unresolvable library, archive too big),
# 2 on bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${PSTRAIN_BUILD_DIR:-$ROOT/build}"
OUTPUT="$ROOT/gpu-bundle.tar.xz"
MAX_MIB="${PSTRAIN_BUNDLE_MAX_MIB:-64}"
PATTERNS=()

# usage [STATUS]: the header's usage text; on stdout for --help, else stderr.
usage() {
  local code="${1:-2}"
  if [ "$code" -eq 0 ]; then exec 3>&1; else exec 3>&2; fi
  sed -n '/^# Usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//; /^$/d' >&3
  exit "$code"
}
die() { echo "gpu_bundle: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage; BUILD_DIR="$2"; shift 2 ;;
    --build-dir=*) BUILD_DIR="${1#*=}"; shift ;;
    --output|-o) [ $# -ge 2 ] || usage; OUTPUT="$2"; shift 2 ;;
    --output=*) OUTPUT="${1#*=}"; shift ;;
    --max-mib) [ $# -ge 2 ] || usage; MAX_MIB="$2"; shift 2 ;;
    --max-mib=*) MAX_MIB="${1#*=}"; shift ;;
    --gpu) PATTERNS+=('pstrain-*' 'models_*' 'worker_*' 'local_reduce*' '*cuda*' '*gpu*' '*nccl*' '*allocator*'); shift ;;
    --tests-only) PATTERNS+=('*_test'); shift ;;
    --tools-only) PATTERNS+=('pstrain-*'); shift ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu_bundle: unknown option $1" >&2; usage ;;
    *) PATTERNS+=("$1"); shift ;;
  esac
done
[ ${#PATTERNS[@]} -gt 0 ] || PATTERNS=('*')
[[ "$MAX_MIB" =~ ^[0-9]+$ ]] || { echo "gpu_bundle: --max-mib must be a whole number, got '$MAX_MIB'" >&2; exit 2; }

case "$OUTPUT" in
  *.tar.xz)  COMPRESS=(xz -9 -T0 -c) ;;
  *.tar.zst) COMPRESS=(zstd -19 -T0 -q -c) ;;
  *.tar.gz)  COMPRESS=(gzip -9 -c) ;;
  *) echo "gpu_bundle: --output must end in .tar.xz, .tar.zst or .tar.gz, got '$OUTPUT'" >&2; exit 2 ;;
esac
command -v "${COMPRESS[0]}" >/dev/null 2>&1 || die "${COMPRESS[0]} not found (needed for $OUTPUT)"
for tool in ldd strip objdump tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (binutils / libc-bin / tar)"
done

BIN_DIR="$BUILD_DIR/bin"
[ -d "$BIN_DIR" ] || die "no $BIN_DIR: build first (tools/build.sh, with -DPSTRAIN_WITH_CUDA=ON for GPU binaries)"

# Libraries the GPU machine provides: the CUDA family (its versions must match
# its driver) and the glibc core (tied to its dynamic loader).
CUDA_RE='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z-]*|nvJitLink|cupti|cufft|curand|cusolver|cusparse|nvToolsExt|nvidia-[a-z-]*)\.so'
GLIBC_RE='^(linux-vdso|linux-gate|ld-linux[^/]*|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libthread_db|libnss_[a-z]*)\.so'

is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

selected=()
for f in "$BIN_DIR"/*; do
  if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi
  name="$(basename "$f")"
  for p in "${PATTERNS[@]}"; do
    # shellcheck disable=SC2254  # p is a glob on purpose
    case "$name" in $p) selected+=("$f"); break ;; esac
  done
done
[ ${#selected[@]} -gt 0 ] || die "no executable in $BIN_DIR matches: ${PATTERNS[*]}"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
B="$STAGE/pstrain-bundle"
mkdir -p "$B/bin" "$B/lib"

declare -A libs=() cuda_needed=()
for f in "${selected[@]}"; do
  name="$(basename "$f")"
  cp "$f" "$B/bin/$name"
  is_elf "$f" || continue
  strip --strip-debug "$B/bin/$name"
  # "soname => /path (0x...)", "soname => not found", "/lib64/ld-linux... (0x...)"
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [[ "$soname" =~ $CUDA_RE ]]; then cuda_needed[$soname]=1; continue; fi
    [[ "$soname" =~ $GLIBC_RE ]] && continue
    [ "$path" != "not" ] || die "$name needs $soname, which ldd cannot find here"
    libs[$soname]="$path"
  done < <(ldd "$f" 2>/dev/null || true)
done
for soname in "${!libs[@]}"; do
  cp -L "${libs[$soname]}" "$B/lib/$soname"
  chmod u+w "$B/lib/$soname"
  strip --strip-unneeded "$B/lib/$soname" 2>/dev/null || true
done

# libstdc++ and libgcc_s go to lib/gcc/, used only where the local glibc can
# load them (Debian 12's libstdc++ needs glibc 2.36); elsewhere the system's
# copies serve, provided they are as new as the build's compiler.
mkdir -p "$B/lib/gcc"
for f in "$B"/lib/libstdc++.so* "$B"/lib/libgcc_s.so*; do
  if [ -e "$f" ]; then mv "$f" "$B/lib/gcc/"; fi
done
# Newest glibc symbol version the given files ask for.
newest_glibc() {
  for f in "$@"; do if [ -f "$f" ]; then objdump -T "$f" 2>/dev/null; fi; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1
}
glibc_needed="$(newest_glibc "$B"/bin/* "$B"/lib/*)"
glibc_needed_gcc="$(newest_glibc "$B"/lib/gcc/*)"
cuda_list="$(printf '%s\n' "${!cuda_needed[@]}" | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//')"
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit (modified)"; fi
{
  echo "# pstrain bundle: see docs/GPU.md"
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "glibc_needed: ${glibc_needed:-unknown}"
  echo "glibc_needed_gcc_runtime: ${glibc_needed_gcc:-unknown}"
  echo "cuda_needed: $cuda_list"
  echo "bin: $(cd "$B/bin" && ls | tr '\n' ' ' | sed 's/ $//')"
  echo "lib: $(cd "$B/lib" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ $//')"
} > "$B/MANIFEST"

cat > "$B/env.sh" <<'ENV_EOF'
# Sourced (bash): sets LD_LIBRARY_PATH to this bundle's lib/ plus the
# directories holding the CUDA libraries its executables need (MANIFEST
# cuda_needed), and PSTRAIN_BIN_DIR to its bin/. Returns 1 with a message
# naming what is missing when a needed library is found nowhere (set
# PSTRAIN_BUNDLE_ALLOW_MISSING=1 to go on anyway). Search order for each
# library: LD_LIBRARY_PATH, the loader cache, $CUDA_HOME and /usr/local/cuda*
# lib dirs, the system lib dirs, then python site-packages nvidia/*/lib and
# torch/lib (pip-installed CUDA libraries).
PSTRAIN_BUNDLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PSTRAIN_BUNDLE_DIR
export PSTRAIN_BIN_DIR="$PSTRAIN_BUNDLE_DIR/bin"

_pstrain_bundle_env() {
  local needed soname d g sub found cache="" want have ldconfig py_sites=""
  local -a extra=() candidates=() missing=() ld_dirs=()
  needed="$(sed -n 's/^cuda_needed: *//p' "$PSTRAIN_BUNDLE_DIR/MANIFEST")"
  for ldconfig in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
    if command -v "$ldconfig" >/dev/null 2>&1; then cache="$("$ldconfig" -p 2>/dev/null || true)"; break; fi
  done
  if command -v python3 >/dev/null 2>&1; then
    py_sites="$(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
                2>/dev/null || true)"
  fi
  local -a globs=(
    "${CUDA_HOME:-/nonexistent}/lib64" "${CUDA_HOME:-/nonexistent}/lib"
    /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib
    /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib /usr/local/cuda-*/targets/x86_64-linux/lib
    /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib /opt/conda/lib
    /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages
    /usr/lib/python3/dist-packages /opt/conda/lib/python3*/site-packages
    "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages "${HOME:-/nonexistent}"/.local/lib/python3*/site-packages
  )
  # Unquoted on purpose: each entry is a glob (no entry holds spaces).
  for g in "${globs[@]}" $py_sites; do
    for d in $g; do
      if [ ! -d "$d" ]; then continue; fi
      case "$d" in
        */site-packages|*/dist-packages)
          for sub in "$d"/nvidia/*/lib "$d"/nvidia/*/*/lib "$d"/torch/lib; do
            if [ -d "$sub" ]; then candidates+=("$sub"); fi
          done ;;
        *) candidates+=("$d") ;;
      esac
    done
  done
  IFS=: read -r -a ld_dirs <<< "${LD_LIBRARY_PATH:-}"
  for soname in $needed; do
    found=""
    for d in "${ld_dirs[@]}" "${extra[@]}"; do
      if [ -n "$d" ] && [ -e "$d/$soname" ]; then found="$d"; break; fi
    done
    if [ -n "$found" ]; then continue; fi
    if grep -q "^[[:space:]]*$soname (.*x86-64" <<< "$cache"; then continue; fi
    for d in "${candidates[@]}"; do
      if [ -e "$d/$soname" ]; then extra+=("$d"); found="$d"; break; fi
    done
    if [ -z "$found" ]; then missing+=("$soname"); fi
  done
  have="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  _pstrain_glibc_ok() {  # true when $have >= $1 (or either is unknown)
    [ -z "$1" ] || [ "$1" = unknown ] || [ -z "$have" ] ||
      [ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n 1)" = "$1" ]
  }
  local path="$PSTRAIN_BUNDLE_DIR/lib"
  want="$(sed -n 's/^glibc_needed_gcc_runtime: *//p' "$PSTRAIN_BUNDLE_DIR/MANIFEST")"
  if _pstrain_glibc_ok "$want"; then
    path="$path:$PSTRAIN_BUNDLE_DIR/lib/gcc"
  else
    echo "pstrain-bundle: note: glibc $have here; using the system libstdc++/libgcc_s (the bundled ones need $want)" >&2
  fi
  for d in "${extra[@]}"; do path="$path:$d"; done
  export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  want="$(sed -n 's/^glibc_needed: *//p' "$PSTRAIN_BUNDLE_DIR/MANIFEST")"
  if ! _pstrain_glibc_ok "$want"; then
    echo "pstrain-bundle: warning: needs glibc $want, this machine has $have; executables may not start" >&2
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "pstrain-bundle: CUDA libraries not found on this machine: ${missing[*]}" >&2
    echo "  searched LD_LIBRARY_PATH, the loader cache and: ${candidates[*]:-no candidate directories}" >&2
    echo "  install the CUDA runtime / cuDNN / NCCL versions the bundle was built with (MANIFEST)," >&2
    echo "  or put their directory in LD_LIBRARY_PATH" >&2
    if [ "${PSTRAIN_BUNDLE_ALLOW_MISSING:-0}" != 1 ]; then return 1; fi
  fi
  return 0
}
_pstrain_bundle_env
ENV_EOF

cat > "$B/run.sh" <<'RUN_EOF'
#!/usr/bin/env bash
# Runs one bundled executable with the bundle's libraries:
#   run.sh NAME [ARGS...]      e.g. run.sh pstrain-bench model --device gpu
# Exits with the executable's status; 2 for an unknown NAME.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 1 ] || [ ! -x "$HERE/bin/$1" ] || [ -d "$HERE/bin/$1" ]; then
  [ $# -lt 1 ] || echo "run.sh: no executable '$1' in $HERE/bin" >&2
  echo "usage: run.sh NAME [ARGS...]; NAME is one of: $(cd "$HERE/bin" && ls | tr '\n' ' ')" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$HERE/env.sh"
name="$1"; shift
exec "$HERE/bin/$name" "$@"
RUN_EOF

cat > "$B/run_gpu_tests.sh" <<'TESTS_EOF'
#!/usr/bin/env bash
# Runs the bundled GoogleTest binaries (ctest cannot: its files hold the build
# machine's paths) and prints one line per binary and the totals.
#   run_gpu_tests.sh [--gtest_filter=PATTERN] [--gtest_*...] [BINARY_GLOB...]
# BINARY_GLOB picks binaries by name (default: every *_test). Each runs with
# --gtest_brief=1 under `timeout $PSTRAIN_TEST_TIMEOUT` (default 900 s), with
# PSTRAIN_BIN_DIR = the bundle's bin/, OMP_NUM_THREADS=1 unless set (as under
# ctest), and PSTRAIN_SOURCE_DIR = the current directory when it is a pstrain
# checkout (tests reading configs/ need it). Full output per binary goes to
# $PSTRAIN_TEST_LOG_DIR (default: a new temp dir); a failing binary's output
# is printed. Exits 0 when every binary passed, 1 otherwise.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$HERE/env.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ -z "${PSTRAIN_SOURCE_DIR:-}" ] && [ -f "$PWD/proto/config.proto" ] && [ -d "$PWD/configs" ]; then
  export PSTRAIN_SOURCE_DIR="$PWD"
fi
GTEST_ARGS=(--gtest_brief=1 --gtest_color=no)
GLOBS=()
for a in "$@"; do
  case "$a" in
    --gtest_*) GTEST_ARGS+=("$a") ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_gpu_tests.sh: unknown option $a (only --gtest_* flags are passed through)" >&2; exit 2 ;;
    *) GLOBS+=("$a") ;;
  esac
done
[ ${#GLOBS[@]} -gt 0 ] || GLOBS=('*_test')
LOG_DIR="${PSTRAIN_TEST_LOG_DIR:-$(mktemp -d -t pstrain-tests.XXXXXX)}"
mkdir -p "$LOG_DIR"
TIMEOUT="${PSTRAIN_TEST_TIMEOUT:-900}"

binaries=()
for f in "$HERE"/bin/*; do
  name="$(basename "$f")"
  for g in "${GLOBS[@]}"; do
    # shellcheck disable=SC2254
    case "$name" in $g) binaries+=("$name"); break ;; esac
  done
done
if [ ${#binaries[@]} -eq 0 ]; then
  echo "run_gpu_tests.sh: no binary in $HERE/bin matches ${GLOBS[*]}" >&2
  exit 1
fi

total_pass=0 total_fail=0 total_skip=0 bad=()
for name in "${binaries[@]}"; do
  log="$LOG_DIR/$name.log"
  start=$(date +%s.%N)
  rc=0
  timeout "$TIMEOUT" "$HERE/bin/$name" "${GTEST_ARGS[@]}" >"$log" 2>&1 || rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  # Brief mode prints "[==========] N tests from M test suites ran.",
  # "[  PASSED  ] N tests." and, when some were, "[  SKIPPED ] N tests.";
  # failures are the rest.
  ran=$(sed -n 's/^\[==========\] \([0-9][0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -n 1)
  pass=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
  skip=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) tests\{0,1\}[.,].*/\1/p' "$log" | tail -n 1)
  pass=${pass:-0} skip=${skip:-0}
  if [ -z "$ran" ]; then
    if [ "$rc" -eq 124 ]; then status="TIMEOUT"; else status="CRASH rc=$rc"; fi
    fail=1
  else
    fail=$((ran - pass - skip))
    if [ "$fail" -gt 0 ]; then status="FAIL"; elif [ "$rc" -ne 0 ]; then status="FAIL rc=$rc"; fail=1; else status="PASS"; fi
  fi
  total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail)) total_skip=$((total_skip + skip))
  printf '%-12s %-34s %5d passed %4d failed %4d skipped %8ss\n' "$status" "$name" "$pass" "$fail" "$skip" "$secs"
  if [ "$status" != PASS ]; then
    bad+=("$name")
    echo "---- $name (last 100 lines of $log) ----"
    tail -n 100 "$log"
    echo "---- end of $name ----"
  fi
done
echo "total: ${#binaries[@]} binaries, $total_pass passed, $total_fail failed, $total_skip skipped${bad:+; failing: ${bad[*]}}"
echo "logs: $LOG_DIR"
[ ${#bad[@]} -eq 0 ]
TESTS_EOF
chmod +x "$B/run.sh" "$B/run_gpu_tests.sh"

mkdir -p "$(dirname "$OUTPUT")"
tmp_out="$OUTPUT.tmp.$$"
tar -C "$STAGE" --sort=name --owner=0 --group=0 --numeric-owner -cf - pstrain-bundle | "${COMPRESS[@]}" > "$tmp_out" ||
  { rm -f "$tmp_out"; die "archiving failed"; }
size=$(stat -c %s "$tmp_out")
raw=$(du -sb "$B" | cut -f1)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
if [ "$size" -gt $((MAX_MIB * 1048576)) ]; then
  rm -f "$tmp_out"
  echo "gpu_bundle: archive is $(mib "$size"), over the ${MAX_MIB} MiB limit; not written. Largest files (uncompressed):" >&2
  (cd "$B" && du -b bin/* lib/* | sort -rn | head -n 10 | awk '{printf "  %8.1f MiB  %s\n", $1 / 1048576, $2}') >&2
  echo "pack fewer executables (--gpu, --tools-only, --tests-only or name patterns)" >&2
  exit 1
fi
mv "$tmp_out" "$OUTPUT"
echo "gpu_bundle: ${#selected[@]} executables, ${#libs[@]} libraries, $(mib "$raw") unpacked"
echo "gpu_bundle: needs from the GPU machine: ${cuda_list:-no CUDA libraries}; glibc >= ${glibc_needed:-?}" \
     "(>= ${glibc_needed_gcc:-?} for the bundled libstdc++, else the system's)"
[ -n "$cuda_list" ] || echo "gpu_bundle: note: nothing links the CUDA runtime: this is a CPU-only build (configure with -DPSTRAIN_WITH_CUDA=ON)"
echo "gpu_bundle: wrote $OUTPUT: $(mib "$size") ($size bytes, limit ${MAX_MIB} MiB)"
