#pragma once
// What `graft train` runs once its flags are read: a train::Trainer over Fashion-MNIST with the
// callbacks the flags ask for, on one process or as one rank of an mpirun job.
//
// Data-parallel (launched by mpirun): --batch-size is the global batch and must split evenly over
// the ranks; rank r takes every size-th sample of the epoch's shuffled order (the order one
// process would use), gradients are averaged by DDP, evaluation is sharded and summed. Only rank
// 0 prints, writes files and saves. Each rank takes cores / ranks-per-node threads unless
// OMP_NUM_THREADS says otherwise, and a bare `--device cuda` means the rank's local GPU. A rank
// that fails ends the whole job (the others would wait in their next collective).
#include <string>

#include "data/fashion_mnist.h"
#include "train/recipe.h"

namespace graft::tools {

struct TrainJob {
  train::Recipe recipe;
  std::string device_text = "cpu";  // --device as given ("cuda" without an index: per rank)
  std::string data = data::FashionMnist::kDefaultRoot;
  std::string save, metrics, plot, graph, memory_timeline;  // empty: not written
  bool profile = false;
  bool ddp_poll = true;  // DDPOptions::poll_during_backward
};

int run_train(const TrainJob& job);

}  // namespace graft::tools
