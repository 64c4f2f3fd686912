#include "worker/run/evaluation.h"

#include <algorithm>
#include <numeric>
#include <vector>

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

}  // namespace

EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size, DecodePool* pool) {
  EvalResult total;
  const int64_t per_example = NumElements(data.example_shape);
  double loss_sum = 0;
  std::vector<int32_t> decoded_labels;
  for (int64_t first = 0; first < data.num_examples; first += batch_size) {
    const int64_t count = std::min<int64_t>(batch_size, data.num_examples - first);
    Shape shape = {count};
    shape.insert(shape.end(), data.example_shape.begin(), data.example_shape.end());
    Tensor images;
    const int32_t* labels = nullptr;
    if (data.encoded()) {
      images = Tensor(shape);
      if (!DecodeBatch(data, first, count, pool, &images, &decoded_labels)) break;
      labels = decoded_labels.data();
    } else {
      float* begin = const_cast<float*>(data.images.data()) + first * per_example;
      images = Tensor(shape, DType::kFloat32, Buffer::Borrow(begin, count * per_example * sizeof(float), nullptr));
      labels = data.labels.data() + first;
    }
    EvalResult r = model.Evaluate(images, labels);
    loss_sum += static_cast<double>(r.mean_loss) * r.examples;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  total.mean_loss = total.examples > 0 ? static_cast<float>(loss_sum / total.examples) : 0.0f;
  return total;
}

}  // namespace pstrain
