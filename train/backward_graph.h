#pragma once
// train::BackwardGraph: the first step's backward graph as Graphviz DOT (autograd::to_dot, leaves
// named after the model's parameters), written before that step's backward frees it. Write it on
// rank 0 only.
#include <cstdio>
#include <string>

#include "train/trainer_callback.h"

namespace graft::train {

class BackwardGraph : public TrainerCallback {
 public:
  explicit BackwardGraph(std::string path, std::FILE* out = stdout);
  void on_before_backward(TrainerState& state) override;

 private:
  std::string path_;
  std::FILE* out_;
};

}  // namespace graft::train
