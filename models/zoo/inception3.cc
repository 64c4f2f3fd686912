// "inception3": Inception-v3 (Szegedy et al. 2015) in torchvision's layout
// without the auxiliary classifier: 23,834,568 parameters at 3x299x299 and
// 1000 classes, batch-norm gamma/beta included. Every convolution is a
// "BasicConv2d": conv2d without bias -> batch_norm (epsilon 1e-3) -> relu,
// nodes "<name>/conv", "<name>/bn", "<name>/relu".
//
//   Conv2d_1a_3x3  32 3x3 stride 2          [32, 149, 149]
//   Conv2d_2a_3x3  32 3x3                   [32, 147, 147]
//   Conv2d_2b_3x3  64 3x3 pad 1             [64, 147, 147]
//   maxpool1       max_pool 3x3 stride 2    [64, 73, 73]
//   Conv2d_3b_1x1  80 1x1                   [80, 73, 73]
//   Conv2d_4a_3x3  192 3x3                  [192, 71, 71]
//   maxpool2       max_pool 3x3 stride 2    [192, 35, 35]
//   Mixed_5b/5c/5d InceptionA (pool features 32, 64, 64)  [256|288|288, 35, 35]
//   Mixed_6a       InceptionB (grid reduction)            [768, 17, 17]
//   Mixed_6b..6e   InceptionC (7x7 widths 128, 160, 160, 192) [768, 17, 17]
//   Mixed_7a       InceptionD (grid reduction)            [1280, 8, 8]
//   Mixed_7b/7c    InceptionE                              [2048, 8, 8]
//   avgpool global_avg_pool -> dropout (0.5) -> fc dense num_classes
//
// Branch pools inside the blocks are avg_pool 3x3 stride 1 pad 1. Concats
// are along channels in torchvision's branch order. Inputs need H, W >= 75
// (at 75x75 Mixed_7c is [2048, 1, 1]).
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

constexpr double kBnEpsilon = 1e-3;

// Builds the blocks of one model; every node name is "<block>/<local>".
class Inception {
 public:
  explicit Inception(ModelBuilder& b) : b_(b) {}

  // BasicConv2d: conv (kh x kw, stride, pad (ph, pw), no bias) -> bn -> relu.
  int Conv(const std::string& name, int input, int64_t filters, int64_t kh, int64_t kw, int64_t stride = 1,
           int64_t ph = 0, int64_t pw = 0) {
    return zoo::ConvBn(b_, name, input, zoo::Conv(filters, kh, kw, stride, ph, pw, /*bias=*/false), kBnEpsilon);
  }
  int AvgPool3(const std::string& name, int input) { return b_.Add(name, zoo::Pool("avg_pool", 3, 1, 1), {input}); }
  int MaxPool3s2(const std::string& name, int input) { return b_.Add(name, zoo::Pool("max_pool", 3, 2), {input}); }
  int Concat(const std::string& name, std::vector<int> inputs) {
    return b_.Add(name, LayerSpec{"concat"}, std::move(inputs));
  }

  int A(const std::string& p, int in, int64_t pool_features) {
    int b1 = Conv(p + "/branch1x1", in, 64, 1, 1);
    int b5 = Conv(p + "/branch5x5_1", in, 48, 1, 1);
    b5 = Conv(p + "/branch5x5_2", b5, 64, 5, 5, 1, 2, 2);
    int b3 = Conv(p + "/branch3x3dbl_1", in, 64, 1, 1);
    b3 = Conv(p + "/branch3x3dbl_2", b3, 96, 3, 3, 1, 1, 1);
    b3 = Conv(p + "/branch3x3dbl_3", b3, 96, 3, 3, 1, 1, 1);
    int bp = AvgPool3(p + "/branch_pool/avgpool", in);
    bp = Conv(p + "/branch_pool", bp, pool_features, 1, 1);
    return Concat(p + "/concat", {b1, b5, b3, bp});
  }

  int B(const std::string& p, int in) {
    int b3 = Conv(p + "/branch3x3", in, 384, 3, 3, 2);
    int bd = Conv(p + "/branch3x3dbl_1", in, 64, 1, 1);
    bd = Conv(p + "/branch3x3dbl_2", bd, 96, 3, 3, 1, 1, 1);
    bd = Conv(p + "/branch3x3dbl_3", bd, 96, 3, 3, 2);
    int bp = MaxPool3s2(p + "/branch_pool", in);
    return Concat(p + "/concat", {b3, bd, bp});
  }

  int C(const std::string& p, int in, int64_t c7) {
    int b1 = Conv(p + "/branch1x1", in, 192, 1, 1);
    int b7 = Conv(p + "/branch7x7_1", in, c7, 1, 1);
    b7 = Conv(p + "/branch7x7_2", b7, c7, 1, 7, 1, 0, 3);
    b7 = Conv(p + "/branch7x7_3", b7, 192, 7, 1, 1, 3, 0);
    int bd = Conv(p + "/branch7x7dbl_1", in, c7, 1, 1);
    bd = Conv(p + "/branch7x7dbl_2", bd, c7, 7, 1, 1, 3, 0);
    bd = Conv(p + "/branch7x7dbl_3", bd, c7, 1, 7, 1, 0, 3);
    bd = Conv(p + "/branch7x7dbl_4", bd, c7, 7, 1, 1, 3, 0);
    bd = Conv(p + "/branch7x7dbl_5", bd, 192, 1, 7, 1, 0, 3);
    int bp = AvgPool3(p + "/branch_pool/avgpool", in);
    bp = Conv(p + "/branch_pool", bp, 192, 1, 1);
    return Concat(p + "/concat", {b1, b7, bd, bp});
  }

  int D(const std::string& p, int in) {
    int b3 = Conv(p + "/branch3x3_1", in, 192, 1, 1);
    b3 = Conv(p + "/branch3x3_2", b3, 320, 3, 3, 2);
    int b7 = Conv(p + "/branch7x7x3_1", in, 192, 1, 1);
    b7 = Conv(p + "/branch7x7x3_2", b7, 192, 1, 7, 1, 0, 3);
    b7 = Conv(p + "/branch7x7x3_3", b7, 192, 7, 1, 1, 3, 0);
    b7 = Conv(p + "/branch7x7x3_4", b7, 192, 3, 3, 2);
    int bp = MaxPool3s2(p + "/branch_pool", in);
    return Concat(p + "/concat", {b3, b7, bp});
  }

  int E(const std::string& p, int in) {
    int b1 = Conv(p + "/branch1x1", in, 320, 1, 1);
    int b3 = Conv(p + "/branch3x3_1", in, 384, 1, 1);
    int b3a = Conv(p + "/branch3x3_2a", b3, 384, 1, 3, 1, 0, 1);
    int b3b = Conv(p + "/branch3x3_2b", b3, 384, 3, 1, 1, 1, 0);
    int bd = Conv(p + "/branch3x3dbl_1", in, 448, 1, 1);
    bd = Conv(p + "/branch3x3dbl_2", bd, 384, 3, 3, 1, 1, 1);
    int bda = Conv(p + "/branch3x3dbl_3a", bd, 384, 1, 3, 1, 0, 1);
    int bdb = Conv(p + "/branch3x3dbl_3b", bd, 384, 3, 1, 1, 1, 0);
    int bp = AvgPool3(p + "/branch_pool/avgpool", in);
    bp = Conv(p + "/branch_pool", bp, 192, 1, 1);
    // torchvision concatenates [1x1, (2a, 2b), (3a, 3b), pool]; one concat of
    // the six maps in that order is the same tensor.
    return Concat(p + "/concat", {b1, b3a, b3b, bda, bdb, bp});
  }

 private:
  ModelBuilder& b_;
};

absl::StatusOr<std::unique_ptr<Model>> BuildInception3(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_RETURN_IF_ERROR(zoo::CheckImageInput(config, 75));
  ModelBuilder b(config.name(), zoo::InputShapeOf(config), config.num_classes(), ctx);
  Inception net(b);
  int n = net.Conv("Conv2d_1a_3x3", ModelBuilder::kInput, 32, 3, 3, 2);
  n = net.Conv("Conv2d_2a_3x3", n, 32, 3, 3);
  n = net.Conv("Conv2d_2b_3x3", n, 64, 3, 3, 1, 1, 1);
  n = net.MaxPool3s2("maxpool1", n);
  n = net.Conv("Conv2d_3b_1x1", n, 80, 1, 1);
  n = net.Conv("Conv2d_4a_3x3", n, 192, 3, 3);
  n = net.MaxPool3s2("maxpool2", n);
  n = net.A("Mixed_5b", n, 32);
  n = net.A("Mixed_5c", n, 64);
  n = net.A("Mixed_5d", n, 64);
  n = net.B("Mixed_6a", n);
  n = net.C("Mixed_6b", n, 128);
  n = net.C("Mixed_6c", n, 160);
  n = net.C("Mixed_6d", n, 160);
  n = net.C("Mixed_6e", n, 192);
  n = net.D("Mixed_7a", n);
  n = net.E("Mixed_7b", n);
  n = net.E("Mixed_7c", n);
  b.Add("avgpool", LayerSpec{"global_avg_pool"}, {n});
  b.Then("dropout", zoo::Dropout(0.5, 1));
  return b.Finish(b.Then("fc", zoo::Dense(config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("inception3", BuildInception3);

}  // namespace
}  // namespace pstrain
