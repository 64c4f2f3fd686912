#include "common/config/config_checks.h"

namespace pstrain {

Registry<ConfigCheck>& ConfigCheckRegistry() {
  static auto* registry = new Registry<ConfigCheck>("config check");
  return *registry;
}

}  // namespace pstrain
