# ThreadSanitizer and absl::Mutex.
#
# Debian's abseil is built without -fsanitize=thread, so TSan cannot see
# absl::Mutex, CondVar or Notification synchronise and reports every access to
# guarded data as a race. This recompiles absl's synchronization code (and the
# base internals it hands waiters through) from the abseil source of the
# installed version, with TSan, into pstrain_common (which everything links):
# the executable's instrumented definitions then serve our code and, by
# symbol interposition, the shared libraries (gRPC) as well.
#
# PSTRAIN_ABSL_SOURCE_DIR: an abseil source tree of the installed version
# (tools/check.sh fetches it with `apt-get source abseil`). Its headers are
# not used: the installed ones (with Debian's inline namespace) are.
#
# SpinLock's out-of-line slow path (base/internal/spinlock.cc) stays Debian's
# uninstrumented one on purpose: Debian's libraries (absl::Now in
# libabsl_time, for one) inline SpinLock::Lock without TSan's annotations and
# call SlowLock; an instrumented SlowLock then "diverts" a lock TSan never saw
# begin and the TSan runtime aborts (CHECK failed: ignore_sync > 0) whenever
# two threads contend for that lock. Uninstrumented, SlowLock is invisible to
# TSan from both kinds of caller, which is what the inline annotations expect.
set(PSTRAIN_ABSL_SOURCE_DIR "" CACHE PATH "abseil source tree matching the installed headers (TSan builds)")
if(NOT EXISTS "${PSTRAIN_ABSL_SOURCE_DIR}/absl/synchronization/mutex.cc")
  message(FATAL_ERROR "PSTRAIN_SANITIZE=thread needs -DPSTRAIN_ABSL_SOURCE_DIR=<abseil source of the installed "
                      "version> (tools/check.sh fetches it); got '${PSTRAIN_ABSL_SOURCE_DIR}'")
endif()
set(_absl ${PSTRAIN_ABSL_SOURCE_DIR}/absl)
add_library(pstrain_tsan_absl OBJECT
  ${_absl}/synchronization/mutex.cc
  ${_absl}/synchronization/barrier.cc
  ${_absl}/synchronization/blocking_counter.cc
  ${_absl}/synchronization/notification.cc
  ${_absl}/synchronization/internal/create_thread_identity.cc
  ${_absl}/synchronization/internal/per_thread_sem.cc
  ${_absl}/synchronization/internal/waiter.cc
  ${_absl}/synchronization/internal/graphcycles.cc
  ${_absl}/base/internal/thread_identity.cc
  ${_absl}/base/internal/low_level_alloc.cc)
target_compile_options(pstrain_tsan_absl PRIVATE -w)
set_target_properties(pstrain_tsan_absl PROPERTIES POSITION_INDEPENDENT_CODE ON)
message(STATUS "pstrain: ThreadSanitizer build; absl synchronization instrumented from ${PSTRAIN_ABSL_SOURCE_DIR}")
