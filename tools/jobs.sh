# Sourced by tools/build.sh and tools/check.sh: how many compilers run at
# once. One per core, but no more than the memory holds (about 2 GiB for the
# heaviest translation units and nvcc): 2 on the 2-core development VM, more
# on a larger CI machine. $PSTRAIN_JOBS overrides it.
# Sets PSTRAIN_BUILD_JOBS.
pstrain_build_jobs() {
  local cores mem_kib by_memory
  cores="$(nproc 2>/dev/null || echo 2)"
  mem_kib="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
  by_memory=$(( mem_kib / (2 * 1024 * 1024) ))
  [ "$by_memory" -lt 1 ] && by_memory=1
  [ "$cores" -lt "$by_memory" ] && echo "$cores" || echo "$by_memory"
}
PSTRAIN_BUILD_JOBS="${PSTRAIN_JOBS:-$(pstrain_build_jobs)}"
