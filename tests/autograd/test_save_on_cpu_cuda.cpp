// SaveOnCpu on CUDA tensors. Needs a GPU: linked with tests/support/gpu_main.cpp, which exits with
// 77 (meson's SKIPPED) without one.
#include <catch2/catch.hpp>

#include <vector>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

int64_t cuda_allocated() { return memory_stats(kCUDA).allocated_bytes; }

// The reference's example: prod_1 and c are saved under SaveOnCpu, a, b and prod_2 on the GPU.
Tensor reference_f(const Tensor& a, const Tensor& b, const Tensor& c, int mode /*0 none, 1 cpu, 2 pinned*/) {
  Tensor prod_1 = a * b;
  Tensor prod_2;
  if (mode == 0) {
    prod_2 = prod_1 * c;
  } else {
    SaveOnCpu cpu(/*pin_memory=*/mode == 2);
    prod_2 = prod_1 * c;
  }
  return prod_2 * a;
}

}  // namespace

TEST_CASE("SaveOnCpu keeps saved CUDA tensors on the host and gives identical gradients") {
  const int64_t n = 1 << 20;
  manual_seed(3);
  Tensor a = randn({n}, TensorOptions{}.device(kCUDA).requires_grad());
  Tensor b = randn({n}, TensorOptions{}.device(kCUDA).requires_grad());
  Tensor c = randn({n}, TensorOptions{}.device(kCUDA).requires_grad());
  std::vector<std::vector<float>> results[3];
  int64_t held[3];
  for (int mode = 0; mode < 3; ++mode) {
    for (Tensor* t : {&a, &b, &c}) t->mutable_grad() = Tensor();
    int64_t before = cuda_allocated();
    Tensor y = reference_f(a, b, c, mode);
    held[mode] = cuda_allocated() - before;
    y.sum().backward();
    results[mode] = {y.to_vector<float>(), a.grad().to_vector<float>(), b.grad().to_vector<float>(),
                     c.grad().to_vector<float>()};
  }
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
  // Without hooks the GPU holds y, prod_1 and prod_2; with SaveOnCpu prod_1 lives on the host
  // (c is a leaf the caller keeps anyway).
  CHECK(held[0] - held[1] == n * 4);
  CHECK(held[0] - held[2] == n * 4);
}

TEST_CASE("SaveOnCpu(pin_memory) frees the GPU copy of a saved output and copies it back for backward") {
  const int64_t n = 1 << 16;
  Tensor x = randn({n}, TensorOptions{}.device(kCUDA).requires_grad());
  int64_t before = cuda_allocated();
  Tensor y;
  {
    SaveOnCpu cpu(/*pin_memory=*/true);
    y = x.exp().sum();  // ExpBackward saves its output: on the host, pinned
  }
  // Only y (one float) stays on the GPU; exp(x) lives in pinned host memory until backward.
  CHECK(cuda_allocated() - before < n * 4);
  y.backward();
  CHECK(x.grad().device() == x.device());
  CHECK(x.grad().cpu().to_vector<float>() == x.exp().cpu().to_vector<float>());
}
