// Settings read from the environment (PSTRAIN_* variables that tune a
// transport rather than an experiment; docs/CONFIG.md lists them).
#pragma once

#include <cstdint>
#include <string_view>

namespace pstrain {

// The integer in environment variable `name`, or `fallback` when it is unset,
// is not an integer, or is below `min` (those two with a warning naming the
// variable, what it holds, in `unit`, and the value ignored).
int64_t IntFromEnvironment(const char* name, int64_t fallback, std::string_view unit, int64_t min = INT64_MIN);

// A switch in environment variable `name`: "1" on, "0" off, `fallback` when
// it is unset or holds anything else (that with a warning naming the
// variable and what it holds).
bool SwitchFromEnvironment(const char* name, bool fallback);

}  // namespace pstrain
