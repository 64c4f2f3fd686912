#include "worker/run/evaluation.h"

#include <algorithm>

namespace pstrain {

EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size) {
  EvalResult total;
  const int64_t per_example = NumElements(data.example_shape);
  double loss_sum = 0;
  for (int64_t first = 0; first < data.num_examples; first += batch_size) {
    const int64_t count = std::min<int64_t>(batch_size, data.num_examples - first);
    Shape shape = {count};
    shape.insert(shape.end(), data.example_shape.begin(), data.example_shape.end());
    float* begin = const_cast<float*>(data.images.data()) + first * per_example;
    Tensor images(shape, DType::kFloat32, Buffer::Borrow(begin, count * per_example * sizeof(float), nullptr));
    EvalResult r = model.Evaluate(images, data.labels.data() + first);
    loss_sum += static_cast<double>(r.mean_loss) * r.examples;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  total.mean_loss = total.examples > 0 ? static_cast<float>(loss_sum / total.examples) : 0.0f;
  return total;
}

}  // namespace pstrain
