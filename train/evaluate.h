#pragma once
// train::evaluate: a classifier's mean cross-entropy, accuracy and confusion matrix on a labelled
// set, under InferenceMode (no autograd state, no version counters: the cheapest forward). The
// model is put in eval mode for the pass and back in train mode after it.
//
// Data-parallel: rank r takes samples r, r + size, ...; the sums (loss, correct, count, confusion)
// are added over the ranks before dividing, so every rank gets the figures of the whole set.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "nn/module.h"
#include "runtime/device.h"
#include "train/world.h"

namespace graft::train {

struct EvalResult {
  double loss = 0;       // mean cross-entropy per sample
  double accuracy = 0;   // fraction of argmax predictions equal to the label
  int64_t samples = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> confusion;  // [true * num_classes + predicted]
};

struct EvalOptions {
  Device device = kCPU;
  std::function<Tensor(const Tensor& images)> prepare_inputs{};  // empty: images.to(device)
  int64_t num_classes = 10;
  int64_t batch_size = 1000;
  World world{};
  std::optional<DType> autocast{};  // the forward under autocast in this dtype (the run's precision)
};

// images [N, ...], labels int64 [N] in [0, num_classes); the model's output [B, num_classes].
EvalResult evaluate(nn::Module& model, const Tensor& images, const Tensor& labels, const EvalOptions& options);

}  // namespace graft::train
