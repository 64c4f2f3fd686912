#!/usr/bin/env bash
# tools/ctest_once_more.sh on a small CMake project of its own: a test that
# fails once then passes is named flaky and does not fail the run; a test
# that always fails, or times out, fails the run and is not called flaky; a
# skipped test is neither; the flaky names reach $PSTRAIN_FLAKY_LOG.
# Usage: ctest_once_more_test.sh SOURCE_DIR
set -euo pipefail
# tools/test.sh exports it for the real run this test is part of: this
# test's deliberate flaky test must not land there.
unset PSTRAIN_FLAKY_LOG
script="$1/tools/ctest_once_more.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # check DESCRIPTION COMMAND...
  if ! "${@:2}"; then echo "FAIL: $1"; fail=1; fi
}

mkdir -p "$work/project"
cat > "$work/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.17)
project(once_more NONE)
enable_testing()
add_test(NAME flaky COMMAND sh -c "if [ -f '$work/ran' ]; then exit 0; fi; touch '$work/ran'; echo first-run-output; exit 1")
add_test(NAME solid COMMAND sh -c "exit 1")
add_test(NAME skipper COMMAND sh -c "exit 77")
set_tests_properties(skipper PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME sleeper COMMAND sh -c "sleep 30")
set_tests_properties(sleeper PROPERTIES TIMEOUT 1)
CMAKE
cmake -S "$work/project" -B "$work/build" > /dev/null

# Everything: fails (solid, sleeper), names only flaky.
rc=0
out="$(cd "$work/build" && PSTRAIN_FLAKY_LOG="$work/flaky.log" "$script" --output-on-failure 2>&1)" || rc=$?
check "a run with tests failing twice exits non-zero (got $rc)" test "$rc" -ne 0
check "the flaky test is named" grep -qx "ctest: flaky (failed, then passed on its second run): flaky" <<<"$out"
check "the first failed run's output is kept" grep -q "first-run-output" <<<"$out"
check "the flaky log names it once" test "$(grep -c '^flaky (in ' "$work/flaky.log")" -eq 1
for t in solid sleeper skipper; do
  check "$t is not called flaky" bash -c "! grep -q 'flaky (failed.*$t' <<<\"\$0\"" "$out"
done

# Only the flaky and the skipped test: passes, names flaky.
rm -f "$work/ran"
rc=0
out="$(cd "$work/build" && "$script" -R 'flaky|skipper' 2>&1)" || rc=$?
check "a run whose only failure passed on its second run exits 0 (got $rc)" test "$rc" -eq 0
check "the flaky test is named when the run passes" grep -q "ctest: flaky (failed, then passed on its second run): flaky$" <<<"$out"

# Nothing fails: nothing is named.
out="$(cd "$work/build" && "$script" -R skipper 2>&1)"
check "a clean run names nothing" bash -c "! grep -q 'ctest: flaky' <<<\"\$0\"" "$out"

if [ "$fail" -ne 0 ]; then
  # Shown without ctest's "***" markers, which the outer run would read as
  # its own tests' failures.
  echo "--- last output:"; sed 's/\*\*\*/[inner] /' <<<"$out"
  exit 1
fi
echo "ctest_once_more: flaky named, double failures fail, skips ignored"
