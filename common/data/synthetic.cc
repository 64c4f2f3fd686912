#include "common/data/synthetic.h"

#include <random>

#include "common/data/portable_random.h"
#include "glog/logging.h"

namespace pstrain {

Dataset MakeSyntheticDataset(int64_t n, Shape example_shape, int num_classes, uint64_t seed) {
  CHECK_GE(n, 0);
  CHECK_GT(num_classes, 0);
  for (int64_t d : example_shape) CHECK_GT(d, 0) << "bad example shape " << ShapeToString(example_shape);
  Dataset data;
  data.num_examples = n;
  data.example_shape = std::move(example_shape);
  data.num_classes = num_classes;
  data.images.resize(static_cast<size_t>(n * ExampleSize(data)));
  data.labels.resize(static_cast<size_t>(n));
  // Separate streams, so the labels do not depend on the image size.
  std::mt19937_64 pixel_gen(DeriveSeed(seed, 0));
  for (float& x : data.images) x = UniformFloat01(pixel_gen);
  std::mt19937_64 label_gen(DeriveSeed(seed, 1));
  for (int32_t& y : data.labels) y = static_cast<int32_t>(UniformInt(label_gen, num_classes));
  return data;
}

}  // namespace pstrain
