// The oneDNN softmax cross-entropy loss; reach it through
// CreateSoftmaxCrossEntropy(DeviceKind::kCpu).
#pragma once

#include <memory>

#include "models/layers/layer.h"

namespace pstrain::cpu {

std::unique_ptr<LossLayer> NewSoftmaxCrossEntropy();

}  // namespace pstrain::cpu
