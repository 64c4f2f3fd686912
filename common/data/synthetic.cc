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
  // Separate streams, so the labels do not depend on the image size. Pixel i
  // is a hash of its index (SplitMix64's i-th output): no generator state to
  // carry, so a ResNet-sized set (77 M pixels at 512 examples) is drawn in a
  // fraction of what a sequential generator takes.
  const uint64_t pixel_stream = DeriveSeed(seed, 0);
  float* pixels = data.images.data();
  const int64_t num_pixels = static_cast<int64_t>(data.images.size());
  for (int64_t i = 0; i < num_pixels; ++i) pixels[i] = UniformFloat01(MixBits(pixel_stream + static_cast<uint64_t>(i)));
  std::mt19937_64 label_gen(DeriveSeed(seed, 1));
  for (int32_t& y : data.labels) y = static_cast<int32_t>(UniformInt(label_gen, num_classes));
  return data;
}

}  // namespace pstrain
