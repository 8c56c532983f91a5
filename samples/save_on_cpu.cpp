// SaveOnCpu: keep the tensors saved for backward in host memory.
//
// Activations saved for backward are often what fills GPU memory during training. Inside a
// SaveOnCpu scope, every saved CUDA tensor is copied to the CPU (pinned memory when asked, for fast
// asynchronous copies) and brought back only when backward needs it. CPU tensors are kept as they
// are, without a copy. This is PyTorch's save_on_cpu example; it runs on the GPU when there is
// one, else on the CPU, where the hooks change nothing.
#include <iostream>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

// prod_1 and c are saved under SaveOnCpu; a, b and prod_2 are saved as usual.
Tensor f(const Tensor& a, const Tensor& b, const Tensor& c, bool offload) {
  Tensor prod_1 = a * b;  // a and b are saved on the device
  Tensor prod_2;
  if (offload) {
    SaveOnCpu save_on_cpu(/*pin_memory=*/true);
    prod_2 = prod_1 * c;  // prod_1 and c are saved on the CPU
  } else {
    prod_2 = prod_1 * c;
  }
  return prod_2 * a;  // prod_2 and a are saved on the device
}

int main() {
  Device dev = cuda_is_available() ? kCUDA : kCPU;
  const int64_t n = 1 << 20;
  manual_seed(0);
  Tensor a = randn({n}, TensorOptions{}.device(dev).requires_grad());
  Tensor b = randn({n}, TensorOptions{}.device(dev).requires_grad());
  Tensor c = randn({n}, TensorOptions{}.device(dev).requires_grad());

  std::vector<float> grads[2];
  for (int offload = 0; offload < 2; ++offload) {
    for (Tensor* t : {&a, &b, &c}) t->mutable_grad() = Tensor();
    int64_t before = memory_stats(dev).allocated_bytes;
    Tensor y = f(a, b, c, offload == 1);
    // What the graph holds on the device between forward and backward.
    int64_t held = memory_stats(dev).allocated_bytes - before;
    std::cout << (offload ? "with SaveOnCpu:    " : "without hooks:     ") << held / 1024 << " KiB held on "
              << dev << "\n";
    y.sum().backward();  // saved CPU copies go back to the device here
    grads[offload] = a.grad().cpu().to_vector<float>();
  }
  // Where the tensors were kept does not change the result.
  bool ok = grads[0] == grads[1];
  std::cout << (ok ? "gradients identical: ok" : "gradients differ: FAILED") << "\n";
  return ok ? 0 : 1;
}
