// Evaluation of a model on a whole dataset, in batches of `batch_size`
// (the last one smaller), without touching its variables.
#pragma once

#include "common/data/dataset.h"
#include "common/data/decode_pool.h"
#include "models/model.h"

namespace pstrain {

// Correct predictions, examples, and the mean loss over all of `data`. An
// encoded dataset is decoded batch by batch on `pool` with the evaluation
// transform; a batch that fails to decode is logged (naming the file and
// offset) and ends the evaluation there: the result covers the examples
// before it.
// Two-class models: also the AUC and log loss over all of `data`.
// `compose` (sparse models, worker/sparse_stage.h) turns a batch's dense
// features into the model's input; an error from it ends the evaluation
// there, as a decode error does.
using InputComposer = std::function<absl::Status(int64_t first, int64_t count, const Tensor& dense, Tensor* input)>;
EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size, DecodePool* pool = nullptr,
                      const InputComposer& compose = nullptr);

}  // namespace pstrain
