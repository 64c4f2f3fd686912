// Evaluation of a model on a whole dataset, in batches of `batch_size`
// (the last one smaller), without touching its variables.
#pragma once

#include "common/data/dataset.h"
#include "models/model.h"

namespace pstrain {

// Correct predictions, examples, and the mean loss over all of `data`.
EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size);

}  // namespace pstrain
