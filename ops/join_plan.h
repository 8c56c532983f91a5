#pragma once
// The device-independent half of cat, stack and constant pad: checks, dtype promotion, output
// shapes and where each piece lands. ops/join.cpp (CPU) and cuda/join_cuda.cpp only move bytes.
// (split / split_with_sizes / chunk are views: one implementation in ops/join.cpp for every device.)
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace graft::kernels {

// PyTorch keeps accepting 1-D empty tensors in cat whatever the other inputs' shapes are.
bool is_legacy_empty(const Tensor& t);

// cat: the output is viewed as [outer, out_sizes[dim] * inner]; input i (skipping legacy empty
// ones) fills columns [start_i, start_i + size_i * inner), start_i the running sum.
struct CatPlan {
  DType dtype = kFloat32;  // the inputs' promoted dtype
  Device device;
  bool only_legacy_empty = false;  // every input is a legacy empty tensor: the result is [0]
  int64_t dim = 0;
  Shape out_sizes;
  int64_t outer = 1, inner = 1;
};
CatPlan plan_cat(const std::vector<Tensor>& tensors, int64_t dim);

// stack: checks the inputs and returns each as a view with a size-1 dim inserted at `dim`, which
// is wrapped in place; the result is cat of those views along `dim`.
std::vector<Tensor> stack_views(const std::vector<Tensor>& tensors, int64_t& dim);

// pad: pads = (before_last, after_last, before_second_last, ...); negative pads crop. The kept
// region of the input is `len` elements starting at element offset in_offset of self's storage;
// it lands at element offset out_offset of a contiguous output of out_sizes.
struct PadPlan {
  Shape out_sizes;
  Shape len;
  int64_t in_offset = 0, out_offset = 0;
  bool fill = false;  // some side grows: the output is filled with the value first
};
PadPlan plan_pad(const Tensor& self, const Shape& pads);

}  // namespace graft::kernels
