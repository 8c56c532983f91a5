#pragma once
// DistributedSampler: this rank's share of a dataset's sample order, as
// torch.utils.data.DistributedSampler.
//
// Invariants:
// 1. The global order of epoch e is data::shuffled_order(n, seed, e) with shuffle (the very order
//    a shuffling DataLoader with that seed visits in epoch e), else [0, n). It depends only on
//    (n, shuffle, seed, e), never on the rank, so every rank computes the same one without talking.
// 2. Sizes are torch's: with drop_last and n % replicas != 0, num_samples = floor(n / replicas) and
//    the order is cut to total_size = num_samples * replicas; otherwise num_samples =
//    ceil(n / replicas) and the order is padded to total_size by repeating it from its start
//    (whole passes first when the padding exceeds n), so every rank gets num_samples indices and
//    ranks run the same number of steps, which their collectives need.
// 3. Rank r takes positions r, r + replicas, ... of the (padded) order. The ranks' shares
//    therefore partition it, and the first B indices of every rank together are the first
//    B * replicas of the global order: a run on R ranks with per-rank batch B sees the global
//    batches of one process with batch B * R (padding repeats aside).
// 4. indices() is a pure function of the constructor's arguments and the epoch; calling the
//    sampler with an epoch, as DataLoader's sampler constructor does each epoch, gives
//    that epoch's indices without touching set_epoch's state.
#include <concepts>
#include <cstdint>
#include <vector>

#include "dist/dist.h"

namespace graft::dist {

class DistributedSampler {
 public:
  // Replicas and rank from the launcher (world_size(), rank()).
  DistributedSampler(int64_t dataset_size, bool shuffle = true, uint64_t seed = 0, bool drop_last = false);
  // Explicit replicas and rank. A template so that (n, true, 42) stays the constructor above:
  // with a plain `int num_replicas` the bool would promote to int and the call be ambiguous.
  template <std::integral R>
    requires(!std::same_as<R, bool>)
  DistributedSampler(int64_t dataset_size, R num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false)
      : DistributedSampler(Config{dataset_size, static_cast<int64_t>(num_replicas), rank, shuffle, seed, drop_last}) {}

  // The epoch indices() is for (torch's set_epoch: call it before each epoch to reshuffle).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // This rank's indices for the current epoch: num_samples() of them (invariant 3).
  std::vector<int64_t> indices() const { return indices_for(epoch_); }
  // This rank's indices for `epoch` (invariant 4): makes the sampler a data::Sampler.
  std::vector<int64_t> operator()(int64_t epoch) const { return indices_for(epoch); }

  int64_t dataset_size() const { return n_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * replicas_; }
  int num_replicas() const { return replicas_; }
  int rank() const { return rank_; }

 private:
  struct Config {
    int64_t dataset_size;
    int64_t num_replicas;
    int rank;
    bool shuffle;
    uint64_t seed;
    bool drop_last;
  };
  explicit DistributedSampler(const Config& c);
  std::vector<int64_t> indices_for(int64_t epoch) const;

  int64_t n_ = 0;
  int replicas_ = 1, rank_ = 0;
  bool shuffle_ = true, drop_last_ = false;
  uint64_t seed_ = 0;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace graft::dist
