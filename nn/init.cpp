#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::nn::init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  GRAFT_CHECK(t.dim() >= 2, "calculate_fan_in_and_fan_out: fan in and fan out can not be computed for a tensor with "
                            "fewer than 2 dimensions (got ", describe(t), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "sigmoid") return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1 + param * param));
  if (nl == "selu") return 3.0 / 4.0;
  GRAFT_ERROR("calculate_gain: unsupported nonlinearity '", nl, "'");
}

Tensor uniform_(Tensor t, double a, double b) {
  NoGradGuard ng;
  ops::uniform_(t, a, b);
  return t;
}

Tensor normal_(Tensor t, double mean, double std) {
  NoGradGuard ng;
  ops::normal_(t, mean, std);
  return t;
}

Tensor constant_(Tensor t, double value) {
  NoGradGuard ng;
  ops::fill_(t, value);
  return t;
}

Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

namespace {
int64_t fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? in : out;
}
}  // namespace

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, const std::string& nonlinearity) {
  double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / static_cast<double>(fan(t, mode)));
  return uniform_(std::move(t), -bound, bound);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, const std::string& nonlinearity) {
  double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
  return normal_(std::move(t), 0, std);
}

Tensor xavier_uniform_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  double a = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(std::move(t), -a, a);
}

Tensor xavier_normal_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(std::move(t), 0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

}  // namespace graft::nn::init
