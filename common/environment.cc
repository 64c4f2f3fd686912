#include "common/environment.h"

#include <cstdlib>

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

}  // namespace pstrain
