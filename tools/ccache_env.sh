# Sourced by tools/build.sh and tools/check.sh: the compiler cache every build
# of pstrain shares, so a fresh clone in another folder (CI) reuses what the
# last build compiled.
#   - base_dir is the checkout: paths inside it are hashed relative to the
#     build directory, so /a/pstrain and /b/ci-clone hit the same entries;
#   - hash_dir off: the working directory (absolute) stays out of the hash
#     although the objects carry debug info; -fdebug-prefix-map (CMakeLists.txt)
#     writes the checkout as "." into that debug info, so nothing points at the
#     folder the object was first compiled in.
# Sets PSTRAIN_CCACHE_ARGS (cmake -D options; empty without ccache).
PSTRAIN_CCACHE_ARGS=()
if [ "${PSTRAIN_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$ROOT"
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
  # Sanitizer, fuzzing and plain builds share one cache; nvcc goes through it too.
  PSTRAIN_CCACHE_ARGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
                       -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
