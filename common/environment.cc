#include "common/environment.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/numbers.h"
#include "glog/logging.h"

namespace pstrain {

int64_t IntFromEnvironment(const char* name, int64_t fallback, std::string_view unit, int64_t min) {
  const char* value = std::getenv(name);
  if (value == nullptr) return fallback;
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min) {
    LOG(WARNING) << "ignoring " << name << "='" << value << "' (not a number of " << unit << ")";
    return fallback;
  }
  return n;
}

bool SwitchFromEnvironment(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr) return fallback;
  const std::string_view v(value);
  if (v == "1" || v == "0") return v == "1";
  LOG(WARNING) << "ignoring " << name << "='" << value << "' (0 or 1)";
  return fallback;
}

}  // namespace pstrain
