#include "worker/run/evaluation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/data/criteo/auc.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Examples [first, first + count) decoded into `images` and `labels`.
bool DecodeBatch(const Dataset& data, int64_t first, int64_t count, DecodePool* pool, Tensor* images,
                 std::vector<int32_t>* labels) {
  std::vector<int64_t> indices(count);
  std::iota(indices.begin(), indices.end(), first);
  const std::vector<uint64_t> seeds(count, 0);
  labels->resize(count);
  const absl::Status s = pool == nullptr
                             ? absl::FailedPreconditionError("an encoded dataset needs a DecodePool")
                             : pool->Decode(data, indices, seeds, /*train=*/false, images->data(), labels->data());
  if (!s.ok()) LOG(ERROR) << "evaluation stopped at example " << first << ": " << s;
  return s.ok();
}

// `data`'s examples [first, first + count): its own memory, or decoded into
// `*decoded` (false: the decode failed, logged).
bool BatchOf(const Dataset& data, int64_t first, int64_t count, DecodePool* pool, Tensor* images,
             std::vector<int32_t>* decoded_labels, const int32_t** labels) {
  Shape shape = {count};
  shape.insert(shape.end(), data.example_shape.begin(), data.example_shape.end());
  if (data.encoded()) {
    *images = Tensor(shape);
    const bool ok = DecodeBatch(data, first, count, pool, images, decoded_labels);
    *labels = decoded_labels->data();
    return ok;
  }
  const int64_t per_example = NumElements(data.example_shape);
  float* begin = const_cast<float*>(data.images.data()) + first * per_example;
  *images = Tensor(shape, DType::kFloat32, Buffer::Borrow(begin, count * per_example * sizeof(float), nullptr));
  *labels = data.labels.data() + first;
  return true;
}

// The AUC and log loss of a two-class model's margins over `labels`.
void ScoreMargins(const std::vector<float>& margins, const std::vector<float>& labels, EvalResult* result) {
  absl::StatusOr<double> auc = criteo::RocAuc(absl::MakeConstSpan(margins), labels);
  if (auc.ok()) result->auc = *auc;
  std::vector<double> p(margins.size());
  for (size_t i = 0; i < margins.size(); ++i) p[i] = 1.0 / (1.0 + std::exp(-static_cast<double>(margins[i])));
  absl::StatusOr<double> log_loss = criteo::LogLoss(p, labels);
  if (log_loss.ok()) result->log_loss = *log_loss;
}

}  // namespace

EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size, DecodePool* pool,
                      const InputComposer& compose) {
  EvalResult total;
  double loss_sum = 0;
  std::vector<int32_t> decoded_labels;
  std::vector<float> margin_labels;
  Tensor composed;
  for (int64_t first = 0; first < data.num_examples; first += batch_size) {
    const int64_t count = std::min<int64_t>(batch_size, data.num_examples - first);
    Tensor images;
    const int32_t* labels = nullptr;
    if (!BatchOf(data, first, count, pool, &images, &decoded_labels, &labels)) break;
    if (compose) {
      const absl::Status s = compose(first, count, images, &composed);
      if (!s.ok()) {
        LOG(ERROR) << "evaluation stopped at example " << first << ": " << s;
        break;
      }
      images = composed;
    }
    EvalResult r = model.Evaluate(images, labels);
    loss_sum += static_cast<double>(r.mean_loss) * r.examples;
    total.correct += r.correct;
    total.examples += r.examples;
    total.margins.insert(total.margins.end(), r.margins.begin(), r.margins.end());
    for (size_t i = 0; i < r.margins.size(); ++i) margin_labels.push_back(static_cast<float>(labels[i]));
  }
  total.mean_loss = total.examples > 0 ? static_cast<float>(loss_sum / total.examples) : 0.0f;
  if (!total.margins.empty()) ScoreMargins(total.margins, margin_labels, &total);
  return total;
}

}  // namespace pstrain
