#pragma once
// TensorMeta: what a tensor is without its data: shape, dtype and device. The engine keeps one per
// forward output to check the gradient that flows back (Node::input_metadata), a derivative rule one
// per forward input (OpNode::inputs), SavedVariable one per saved tensor (to check an unpack hook's
// result and to name the tensor in errors), checkpoint one per saved tensor of the original forward
// (to check the recomputation). One struct, so "the same tensor type" means one thing everywhere.
#include <string>

#include "runtime/tensor.h"

namespace graft {

struct TensorMeta {
  Shape shape;
  DType dtype = kFloat32;
  Device device;

  static TensorMeta of(const Tensor& t) { return TensorMeta{t.sizes(), t.dtype(), t.device()}; }
  bool matches(const Tensor& t) const { return t.sizes() == shape && t.dtype() == dtype && t.device() == device; }
  bool operator==(const TensorMeta&) const = default;
  // "[2, 3] Float32 cpu": shape, dtype and device as the error messages print them.
  std::string str() const;
};

}  // namespace graft
