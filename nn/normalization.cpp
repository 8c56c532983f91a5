#include "nn/normalization.h"

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace graft::nn {

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine)
    : normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  if (affine) {
    weight = register_parameter("weight", graft::empty(normalized_shape));
    bias = register_parameter("bias", graft::empty(normalized_shape));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& input) {
  return graft::layer_norm(input, normalized_shape, weight, bias, eps);
}

BatchNorm2d::BatchNorm2d(int64_t c, double eps_, double momentum_, bool affine_, bool track)
    : num_features(c), eps(eps_), momentum(momentum_), affine(affine_), track_running_stats(track) {
  if (affine) {
    weight = register_parameter("weight", graft::empty({c}));
    bias = register_parameter("bias", graft::empty({c}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", graft::zeros({c}));
    running_var = register_buffer("running_var", graft::ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", graft::zeros({}, dtype(kInt64)));
  }
  reset_parameters();
}

void BatchNorm2d::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNorm2d::reset_parameters() {
  reset_running_stats();
  if (!affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  GRAFT_CHECK(x.dim() == 4, "BatchNorm2d: expected 4D input [N, C, H, W] (got ", describe(x), ")");
  GRAFT_CHECK(x.size(1) == num_features, "BatchNorm2d: expected ", num_features, " channels (got ", describe(x), ")");
  const Shape bshape{1, num_features, 1, 1};
  bool use_batch_stats = is_training() || !track_running_stats;
  Tensor mean, var;
  if (use_batch_stats) {
    int64_t n = x.numel() / num_features;
    GRAFT_CHECK(!is_training() || n > 1, "BatchNorm2d: expected more than 1 value per channel when training (got ",
                describe(x), ")");
    mean = graft::mean(x, {0, 2, 3}, true);
    Tensor centered = x - mean;
    var = graft::mean(centered * centered, {0, 2, 3}, true);  // biased
    if (is_training() && track_running_stats) {
      NoGradGuard ng;
      Tensor m = mean.detach().view({num_features});
      Tensor v = var.detach().view({num_features}) * (static_cast<double>(n) / static_cast<double>(n - 1));
      if (m.dtype() != running_mean.dtype()) m = m.to(running_mean.dtype());
      if (v.dtype() != running_var.dtype()) v = v.to(running_var.dtype());
      ops::lerp_(running_mean, m, momentum);
      ops::lerp_(running_var, v, momentum);
      num_batches_tracked.add_(1);
    }
    Tensor y = centered * graft::rsqrt(var + eps);
    if (affine) y = y * weight.view(bshape) + bias.view(bshape);
    return y;
  }
  mean = running_mean.view(bshape);
  var = running_var.view(bshape);
  Tensor y = (x - mean) * graft::rsqrt(var + eps);
  if (affine) y = y * weight.view(bshape) + bias.view(bshape);
  return y;
}

}  // namespace graft::nn
