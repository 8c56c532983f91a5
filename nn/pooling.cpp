#include "nn/pooling.h"

#include "autograd/functional.h"

namespace graft::nn {

namespace {
Size2 default_stride(Size2 stride, Size2 kernel) {
  return Size2{stride.h == 0 ? kernel.h : stride.h, stride.w == 0 ? kernel.w : stride.w};
}
}  // namespace

MaxPool2d::MaxPool2d(Size2 k, Size2 s, Size2 p, Size2 d, bool ceil)
    : kernel_size(k), stride(default_stride(s, k)), padding(p), dilation(d), ceil_mode(ceil) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return graft::max_pool2d(input, kernel_size.shape(), stride.shape(), padding.shape(), dilation.shape(), ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 k, Size2 s, Size2 p, bool ceil, bool count_pad)
    : kernel_size(k), stride(default_stride(s, k)), padding(p), ceil_mode(ceil), count_include_pad(count_pad) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return graft::avg_pool2d(input, kernel_size.shape(), stride.shape(), padding.shape(), ceil_mode, count_include_pad);
}

}  // namespace graft::nn
