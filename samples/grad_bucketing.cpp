// Gradient bucketing with multi-grad hooks: act on a group of gradients as soon as the whole group
// is ready, while backward is still running.
//
// Data-parallel training (PyTorch's DDP) splits the parameters into buckets and starts the
// all-reduce of a bucket the moment all of its gradients exist, overlapping communication with the
// rest of backward. register_multi_grad_hook(tensors, fn) (All mode) calls fn once per backward,
// right after the last gradient of `tensors` is computed. Here each bucket's "all-reduce" is a
// stand-in: the fused L2 norm of the bucket's gradients.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

struct Layer {
  Tensor weight, bias;
};

int main() {
  manual_seed(0);
  // A small MLP: 16 -> 32 -> 32 -> 4.
  std::vector<Layer> layers;
  for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{{16, 32}, {32, 32}, {32, 4}}) {
    layers.push_back({(randn({out, in}) * (1.0 / std::sqrt(double(in)))).requires_grad_(),
                      zeros({out}, requires_grad())});
  }

  // One bucket per layer (bucket i holds layer i's weight and bias). Gradients arrive from the last
  // layer backwards, so bucket 2 completes first.
  struct Bucket {
    std::vector<Tensor> params;
    double norm = -1;
    bool inside_backward = false;
    int layers_still_waiting = 0;  // other layers without gradients when this bucket was ready
  };
  std::vector<Bucket> buckets;
  for (auto& l : layers) buckets.push_back({{l.weight, l.bias}});

  std::vector<int> completion_order;
  for (size_t i = 0; i < buckets.size(); ++i) {
    register_multi_grad_hook(buckets[i].params, [&, i](const std::vector<Tensor>& grads) {
      // Called during backward (grad mode is off here), with this bucket's gradients.
      Bucket& b = buckets[i];
      std::vector<Tensor> flat;
      for (const auto& g : grads) flat.push_back(g.flatten());
      b.norm = cat(flat).norm().item<float>();  // the fused "all-reduce" of the bucket
      b.inside_backward = current_graph_task_id() != -1;
      for (size_t j = 0; j < layers.size(); ++j)
        if (j != i && !layers[j].weight.grad().defined()) ++b.layers_still_waiting;
      completion_order.push_back(static_cast<int>(i));
    });
  }

  // Forward and backward.
  Tensor x = randn({8, 16});
  Tensor target = randn({8, 4});
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    h = linear(h, layers[i].weight, layers[i].bias);
    if (i + 1 < layers.size()) h = h.relu();
  }
  Tensor loss = (h - target).pow(2).mean();
  loss.backward();

  std::cout << "buckets completed in order:";
  for (int i : completion_order) std::cout << " " << i;
  std::cout << "\n";

  bool ok = completion_order.size() == buckets.size();
  for (size_t i = 0; i < buckets.size(); ++i) {
    const Bucket& b = buckets[i];
    // The norm computed during backward matches the one from the final .grad tensors.
    double sq = 0;
    for (const auto& p : b.params) sq += p.grad().pow(2).sum().item<float>();
    double expected = std::sqrt(sq);
    std::cout << "bucket " << i << ": grad norm " << b.norm << " (after backward: " << expected << ")"
              << ", ready while " << b.layers_still_waiting << " other layer(s) still waited for gradients\n";
    ok = ok && b.inside_backward && std::abs(b.norm - expected) <= 1e-5 * (1 + expected);
  }
  // Overlap: the last layer's bucket was handled while both earlier layers still waited.
  ok = ok && buckets.back().layers_still_waiting == 2 && completion_order.front() == 2;
  std::cout << (ok ? "ok" : "FAILED") << "\n";
  return ok ? 0 : 1;
}
