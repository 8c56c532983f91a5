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
//
// Run checkpoints (--run-dir, --resume; train/run_checkpoint.h): rank 0 writes them and every rank
// records its data position; --resume DIR reads the newest usable one, takes its recipe (flags that
// contradict it are refused, --epochs may change), and the run prints from the next step exactly
// what the run that never stopped prints. SIGINT/SIGTERM end a run with a run directory after the
// current step and a checkpoint, with exit status 130/143.
#include <string>

#include "data/fashion_mnist.h"
#include "train/recipe.h"

namespace graft::tools {

struct TrainJob {
  train::Recipe recipe;
  train::Recipe::Flags given;       // the recipe flags on the command line (checked against a resumed run)
  std::string device_text = "cpu";  // --device as given ("cuda" without an index: per rank)
  std::string data = data::FashionMnist::kDefaultRoot;  // gpt: a UTF-8 text file when data_given
  bool data_given = false;          // --data was on the command line (gpt without it: the fortunes)
  std::string save, metrics, plot, graph, memory_timeline;  // empty: not written
  bool profile = false;
  std::string run_dir;              // --run-dir: checkpoints go here
  std::string resume;               // --resume DIR: continue that run (and keep saving there)
  int64_t save_every = -1;          // --save-every N steps; -1: not given (0: epoch ends only)
  int64_t train_samples = 0, test_samples = 0;  // 0: the whole split
  bool ddp_poll = true;  // DDPOptions::poll_during_backward
};

int run_train(const TrainJob& job);

}  // namespace graft::tools
