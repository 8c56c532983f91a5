#include "dist/distributed_sampler.h"

#include <limits>
#include <numeric>

#include "data/data_loader.h"
#include "runtime/error.h"

namespace graft::dist {

DistributedSampler::DistributedSampler(int64_t dataset_size, bool shuffle, uint64_t seed, bool drop_last)
    : DistributedSampler(Config{dataset_size, dist::world_size(), dist::rank(), shuffle, seed, drop_last}) {}  // qualified: the members rank() and num_replicas() would shadow them

DistributedSampler::DistributedSampler(const Config& c)
    : n_(c.dataset_size), shuffle_(c.shuffle), drop_last_(c.drop_last), seed_(c.seed) {
  GRAFT_CHECK(c.dataset_size >= 0, "DistributedSampler: dataset_size must be non-negative, got ", c.dataset_size);
  GRAFT_CHECK(c.num_replicas >= 1 && c.num_replicas <= std::numeric_limits<int>::max(),
              "DistributedSampler: num_replicas must be at least 1 (and fit an int), got ", c.num_replicas);
  GRAFT_CHECK(c.rank >= 0 && c.rank < c.num_replicas, "DistributedSampler: rank ", c.rank,
              " is outside [0, num_replicas = ", c.num_replicas, ")");
  replicas_ = static_cast<int>(c.num_replicas);
  rank_ = c.rank;
  // torch: ceil((n - R) / R) with drop_last and a remainder, which is floor(n / R) (also for n < R).
  num_samples_ = drop_last_ && n_ % replicas_ != 0 ? n_ / replicas_ : (n_ + replicas_ - 1) / replicas_;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  GRAFT_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be non-negative, got ", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices_for(int64_t epoch) const {
  GRAFT_CHECK(epoch >= 0, "DistributedSampler: epoch must be non-negative, got ", epoch);
  std::vector<int64_t> order;
  if (shuffle_) {
    order = data::shuffled_order(n_, seed_, epoch);
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Position p of the padded (or cut) order is order[p % n]: torch's `indices += indices[:padding]`
  // and its whole-pass repeat when padding > n both read that way, and a cut never reaches p >= n.
  // total_size is 0 whenever n is, so the modulo never divides by zero.
  const int64_t total = total_size();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t p = rank_; p < total; p += replicas_) mine.push_back(order[static_cast<size_t>(p % n_)]);
  return mine;
}

}  // namespace graft::dist
