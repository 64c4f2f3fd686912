#include "common/config/byte_scale.h"

#include "absl/strings/str_cat.h"
#include "common/config/time_dilation.h"

namespace pstrain {

bool ByteScaleInRange(double byte_scale) { return byte_scale >= 1 && byte_scale <= 1000; }

absl::Status CheckByteScale(const ExperimentConfig& config, double byte_scale) {
  if (!ByteScaleInRange(byte_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("--byte_scale ", byte_scale, ": expected a number in [1, 1000]"));
  }
  if (byte_scale == 1) return absl::OkStatus();
  if (config.device() != "emulated") {
    return absl::InvalidArgumentError(absl::StrCat("--byte_scale ", byte_scale, ": expected 1 with device '",
                                                   config.device(),
                                                   "' (only an emulated device's variables can shrink)"));
  }
  if (config.model().tables_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--byte_scale ", byte_scale, ": expected 1 with model.tables (embedding tables are not scaled)"));
  }
  return absl::OkStatus();
}

double ByteScale(const ExperimentConfig& config, double byte_scale) {
  return config.device() == "emulated" ? byte_scale : 1.0;
}

double LinkDilation(const ExperimentConfig& config, double byte_scale) {
  return TimeDilation(config) * ByteScale(config, byte_scale);
}

}  // namespace pstrain
