#!/usr/bin/env bash
# Runs ctest in the current directory with the given arguments, giving each
# failed test one more run (--repeat until-pass:2), and then names every test
# that failed and passed on its second run, so a flaky test is seen, not
# hidden: its failed output stays in the log above, and the summary line
#   ctest: flaky (failed, then passed on its second run): <names>
# ends the run. A test that fails twice fails the run (ctest's exit status).
#
# Why a second run: the suite runs real processes and real servers two at a
# time on small machines, under sanitizers too; a test that loses a race with
# the machine's load once in hundreds of runs must not block every change,
# nor go unnoticed.
#
# Usage: (cd <build dir> && tools/ctest_once_more.sh [ctest arguments...])
# $PSTRAIN_FLAKY_LOG, if set: a file the flaky tests' names are appended to.
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
ctest --repeat until-pass:2 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# "  12/370 Test  #117: Name ...***Failed" (or ***Timeout, ***Exception...,
# ***Not Run; ***Skipped is no failure) for every failed run; the final
# failures are listed after "FAILED:".
mapfile -t failed_once < <(sed -nE 's/^.*Test +#[0-9]+: ([^ ]+) .*\*\*\*(Failed|Timeout|Exception|Not Run).*$/\1/p' "$log" |
                           sort -u)
mapfile -t failed_finally < <(sed -n '/^The following tests FAILED:/,$p' "$log" |
                              sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+) .*$/\1/p' | sort -u)
flaky=()
for t in "${failed_once[@]}"; do
  if ! printf '%s\n' "${failed_finally[@]}" | grep -qxF -- "$t"; then flaky+=("$t"); fi
done
if [ ${#flaky[@]} -gt 0 ]; then
  echo "ctest: flaky (failed, then passed on its second run): ${flaky[*]}"
  # tools/test.sh repeats them all at its end.
  if [ -n "${PSTRAIN_FLAKY_LOG:-}" ]; then
    for t in "${flaky[@]}"; do echo "$t (in $PWD)" >> "$PSTRAIN_FLAKY_LOG"; done
  fi
fi
exit "$status"
