#pragma once
// nn::init: in-place initialisers (torch.nn.init). Each runs under NoGradGuard and returns its
// argument, so parameters that require grad can be initialised.
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/tensor.h"

namespace graft::nn::init {

enum class FanMode { FanIn, FanOut };

// {fan_in, fan_out} of a weight with at least 2 dims: size(1) * receptive field, size(0) * receptive field.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);
// torch.nn.init.calculate_gain: "linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu" (param = slope), "selu".
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

Tensor uniform_(Tensor tensor, double a = 0, double b = 1);
Tensor normal_(Tensor tensor, double mean = 0, double std = 1);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);
// U(-bound, bound), bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor kaiming_uniform_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu");
// N(0, std), std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                       const std::string& nonlinearity = "leaky_relu");
// U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1);
Tensor xavier_normal_(Tensor tensor, double gain = 1);

}  // namespace graft::nn::init
