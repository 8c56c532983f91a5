#include "nn/conv.h"

#include <cmath>

#include "autograd/functional.h"
#include "nn/init.h"

namespace graft::nn {

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 s, Size2 p, Size2 d, int64_t g, bool with_bias)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), dilation(d), groups(g) {
  GRAFT_CHECK(g > 0, "Conv2d: groups must be a positive integer, got ", g);
  GRAFT_CHECK(in % g == 0, "Conv2d: in_channels (", in, ") must be divisible by groups (", g, ")");
  GRAFT_CHECK(out % g == 0, "Conv2d: out_channels (", out, ") must be divisible by groups (", g, ")");
  GRAFT_CHECK(k.h > 0 && k.w > 0 && s.h > 0 && s.w > 0 && d.h > 0 && d.w > 0 && p.h >= 0 && p.w >= 0,
              "Conv2d: kernel_size, stride and dilation must be positive and padding non-negative");
  weight = register_parameter("weight", graft::empty({out, in / g, k.h, k.w}));
  if (with_bias) bias = register_parameter("bias", graft::empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return graft::conv2d(input, weight, bias, stride.shape(), padding.shape(), dilation.shape(), groups);
}

}  // namespace graft::nn
