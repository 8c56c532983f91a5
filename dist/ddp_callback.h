#pragma once
// dist::DDPCallback: data-parallel training with train::Trainer.
//
// on_train_begin wraps the trainer's forward in DistributedDataParallel when the world has more
// than one rank (at one rank it leaves it alone: one rank's average is its own gradient); the
// optimizer keeps its parameters, which DDP overwrites in place with rank 0's. on_train_end prints
// DDP's statistics (buckets, bytes per step, how far ahead of backward's end they launched, the
// exposed wait). Add it on every rank (building DDP is a collective), after callbacks whose
// on_train_begin runs steps of its own on one rank (train::MemoryTimeline): DDP's hooks would make
// those steps collective.
//
// training_world(): this process's train::World (rank, size, sums over MPI in float64, exact for
// the counts an evaluation adds). Call dist::init() first.
#include <cstdio>
#include <memory>

#include "dist/ddp.h"
#include "train/trainer_callback.h"
#include "train/world.h"

namespace graft::dist {

train::World training_world();

class DDPCallback : public train::TrainerCallback {
 public:
  explicit DDPCallback(DDPOptions options = {}, std::FILE* out = stdout);
  void on_train_begin(train::TrainerState& state) override;
  void on_train_end(train::TrainerState& state) override;
  // The wrapper, once on_train_begin made one (null at world size 1).
  const DistributedDataParallel* ddp() const { return ddp_.get(); }

 private:
  DDPOptions options_;
  std::FILE* out_;
  std::shared_ptr<DistributedDataParallel> ddp_;
};

}  // namespace graft::dist
