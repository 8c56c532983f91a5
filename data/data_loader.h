#pragma once
// data::DataLoader: batches of (images, labels) over two tensors whose first dim is the sample.
//
// Invariants:
// 1. Each epoch visits order() front to back. Without a sampler the order is [0, n) or, with
//    shuffle, shuffled_order(n, seed, epoch): the loader's own generator (never the global one),
//    so the same seed gives the same sequence of orders and manual_seed() cannot disturb it.
// 2. With a sampler the order of epoch e is sampler(e), taken as is (repeats and a length other
//    than n allowed, as a DistributedSampler's padded share needs), with every index checked
//    against [0, n) before the epoch is entered: a bad index is an error there that leaves the
//    loader in its previous epoch, never an out-of-range gather halfway through the epoch.
// 3. The order depends only on the epoch number (and the seed, or the sampler, which is taken to
//    be a function of its epoch), so set_epoch(e) replays epoch e exactly; num_batches() counts
//    the current epoch's order.
// 4. Epochs: the first pass is epoch 0. `for (auto& b : loader)` starts a new epoch each time it is
//    run after the current one has been (partly) consumed; next() returns std::nullopt at the end
//    of an epoch, and reset() starts the next epoch.
// 5. drop_last drops a final batch smaller than batch_size.
// 6. (epoch(), position()) is the loader's whole place: seek(epoch, position) on a loader built
//    the same way gives the batches the original would have given next, so a resumed run sees the
//    data a run that never stopped sees (train/run_state.h saves it in run checkpoints).
#include <concepts>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace graft::data {

class FashionMnist;

// The shuffled order of [0, n) for (seed, epoch) that a shuffling DataLoader uses (invariant 1).
// dist::DistributedSampler draws its global order from here too, so ranks that each take their
// stride of it together see the batches one shuffling process would.
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

// `count` indices drawn uniformly from [0, n) with replacement for (seed, epoch), from the same
// generator as shuffled_order: a sampler of random draws (the random text windows a language
// model trains on) that depends only on its epoch, as invariant 3 needs.
std::vector<int64_t> random_draws(int64_t n, int64_t count, uint64_t seed, int64_t epoch);
// Gives the sample order of an epoch (invariant 2).
using Sampler = std::function<std::vector<int64_t>(int64_t epoch)>;

struct Batch {
  Tensor images;  // [B, ...]
  Tensor labels;  // [B]
};
// Makes the batch of the samples `index` ([b] int64, CPU) of a data set that is not two stacked
// tensors (a text window is sample i's tokens [i, i + T)).
using BatchFn = std::function<Batch(const Tensor& index)>;

class DataLoader {
 public:
  DataLoader(Tensor images, Tensor labels, int64_t batch_size, bool shuffle = false, bool drop_last = false,
             uint64_t seed = 0);
  DataLoader(const FashionMnist& dataset, int64_t batch_size, bool shuffle = false, bool drop_last = false,
             uint64_t seed = 0);
  // Each epoch's order is sampler(epoch) (invariant 2).
  DataLoader(Tensor images, Tensor labels, int64_t batch_size, Sampler sampler, bool drop_last = false);
  DataLoader(const FashionMnist& dataset, int64_t batch_size, Sampler sampler, bool drop_last = false);
  // num_samples samples that make_batch assembles, in sampler(epoch)'s order (invariant 2).
  DataLoader(int64_t num_samples, BatchFn make_batch, int64_t batch_size, Sampler sampler, bool drop_last = false);
  // Any other callable (a lambda, a dist::DistributedSampler). Without these a captureless lambda
  // would be ambiguous: it also converts, through a function pointer, to the `bool shuffle` above.
  template <class F>
    requires(!std::same_as<std::decay_t<F>, Sampler> && std::is_invocable_r_v<std::vector<int64_t>, F&, int64_t>)
  DataLoader(Tensor images, Tensor labels, int64_t batch_size, F sampler, bool drop_last = false)
      : DataLoader(std::move(images), std::move(labels), batch_size, Sampler(std::move(sampler)), drop_last) {}
  template <class F>
    requires(!std::same_as<std::decay_t<F>, Sampler> && std::is_invocable_r_v<std::vector<int64_t>, F&, int64_t>)
  DataLoader(const FashionMnist& dataset, int64_t batch_size, F sampler, bool drop_last = false)
      : DataLoader(dataset, batch_size, Sampler(std::move(sampler)), drop_last) {}

  // The dataset's sample count (with a sampler an epoch visits order().size() of them).
  int64_t num_samples() const { return n_; }
  // Batches in the current epoch's order.
  int64_t num_batches() const;
  int64_t batch_size() const { return batch_size_; }
  // The epoch the loader is in (0 for the first pass).
  int64_t epoch() const { return epoch_; }
  // The sample order of the current epoch.
  const std::vector<int64_t>& order() const { return order_; }

  // The next batch of the current epoch, or nullopt when the epoch is over.
  std::optional<Batch> next();
  // Starts the next epoch (a new shuffle or sampler order).
  void reset();
  // Jumps to the start of `epoch` (invariant 3).
  void set_epoch(int64_t epoch);
  // Samples of the current epoch's order already handed out in batches.
  int64_t position() const { return cursor_; }
  // Enters `epoch` with its first `position` samples taken (invariant 6); position must lie in
  // [0, order().size()] and is checked before the loader leaves its current place.
  void seek(int64_t epoch, int64_t position);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;
    Iterator() = default;
    const Batch& operator*() const { return *current_; }
    const Batch* operator->() const { return &*current_; }
    Iterator& operator++() {
      current_ = loader_->next();
      return *this;
    }
    bool operator==(const Iterator& o) const { return !current_.has_value() && !o.current_.has_value(); }

   private:
    friend class DataLoader;
    Iterator(DataLoader* l) : loader_(l), current_(l->next()) {}
    DataLoader* loader_ = nullptr;
    std::optional<Batch> current_;
  };
  // Starts a new epoch if the current one has already been started.
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  // Makes `epoch`'s order and enters that epoch at its start.
  void make_order(int64_t epoch);
  Tensor images_, labels_;
  int64_t n_ = 0, batch_size_ = 1;
  bool shuffle_ = false, drop_last_ = false;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
  Sampler sampler_;     // empty unless a sampler constructor made the loader
  BatchFn make_batch_;  // set: batches come from it, images_ and labels_ are empty
  int64_t cursor_ = 0;  // next sample position in order_
  bool started_ = false;
  std::vector<int64_t> order_;
};

}  // namespace graft::data
