#pragma once
// Normalisation layers: nn::LayerNorm and nn::BatchNorm2d (weight 1, bias 0 by default).
#include <cstdint>

#include "nn/module.h"
#include "runtime/shape.h"

namespace graft::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "LayerNorm"; }
  void reset_parameters();

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

// Normalises [N, C, H, W] over {0, 2, 3}. Training: batch statistics (biased variance) normalise,
// and running_mean / running_var (unbiased variance) move by `momentum`; eval: the running stats.
// Buffers: running_mean [C] (0), running_var [C] (1), num_batches_tracked (int64 scalar).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "BatchNorm2d"; }
  void reset_running_stats();
  void reset_parameters();

  int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                       // [C] when affine
  Tensor running_mean, running_var, num_batches_tracked;     // when track_running_stats
};

}  // namespace graft::nn
