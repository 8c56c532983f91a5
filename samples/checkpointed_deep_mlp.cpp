// Trading compute for memory on a deep MLP: plain, sqrt(N) checkpointed segments, nested halving.
// Prints bytes alive after forward, the peak during the step, and the step time for each mode.
//   checkpointed_deep_mlp          # 16 x (Linear 256 + Tanh), batch 64: quick
//   checkpointed_deep_mlp --full   # 64 x (Linear 1024 + Tanh), batch 256: the benchmark's shape
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "graft.h"

using namespace graft;

int main(int argc, char** argv) {
  bool full = argc > 1 && std::strcmp(argv[1], "--full") == 0;
  const int layers = full ? 64 : 16, width = full ? 1024 : 256, batch = full ? 256 : 64;
  manual_seed(0);
  std::vector<Tensor> params;
  std::vector<nn::Layer> fns;
  for (int i = 0; i < layers; ++i) {
    Tensor w = (randn({width, width}) * (1.0 / std::sqrt(width))).requires_grad_();
    Tensor b = zeros({width}).requires_grad_();
    params.push_back(w);
    params.push_back(b);
    fns.push_back([w, b](const Tensor& h) { return linear(h, w, b).tanh(); });
  }
  Tensor x = randn({batch, width});
  std::vector<Tensor> reference;
  const char* names[] = {"plain", "sqrt(N) segments", "nested halving"};
  std::printf("%d x (Linear %d + Tanh), batch %d\n", layers, width, batch);
  std::printf("%-18s %12s %12s %10s\n", "mode", "held MiB", "peak MiB", "step ms");
  for (int mode = 0; mode < 3; ++mode) {
    for (auto& p : params) p.mutable_grad() = zeros_like(p);  // grads preallocated: peak = activations
    int64_t before = memory_stats(kCPU).allocated_bytes;
    reset_peak_memory_stats(kCPU);
    auto t0 = std::chrono::steady_clock::now();
    Tensor h = mode == 0 ? x : mode == 1 ? nn::checkpoint_sequential(fns, static_cast<int64_t>(std::sqrt(layers)), x)
                                         : nn::checkpoint_nested(fns, x);
    if (mode == 0)
      for (auto& f : fns) h = f(h);
    Tensor loss = h.mean();
    double held = static_cast<double>(memory_stats(kCPU).allocated_bytes - before) / (1 << 20);
    h = Tensor();
    loss.backward();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double peak = static_cast<double>(memory_stats(kCPU).peak_allocated_bytes - before) / (1 << 20);
    std::printf("%-18s %12.1f %12.1f %10.1f\n", names[mode], held, peak, ms);
    // Every mode computes the same gradients, bit for bit.
    if (mode == 0) {
      for (auto& p : params) reference.push_back(p.grad().clone());
    } else {
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].grad().to_vector<float>() != reference[i].to_vector<float>()) {
          std::printf("gradient mismatch in mode %s\n", names[mode]);
          return 1;
        }
    }
  }
  return 0;
}
