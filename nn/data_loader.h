#pragma once
// data::DataLoader: batches of (images, labels) over two tensors whose first dim is the sample.
//
// - Shuffling uses the loader's own generator (never the global one), seeded by `seed` and the
//   epoch number: each epoch gets a new order, and the same seed gives the same sequence of orders.
// - Epochs: the first pass is epoch 0. `for (auto& b : loader)` starts a new epoch each time it is
//   run after the current one has been (partly) consumed; next() returns std::nullopt at the end of
//   an epoch, and reset() starts the next epoch.
// - drop_last drops a final batch smaller than batch_size.
#include <cstdint>
#include <iterator>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace graft::data {

class FashionMnist;

struct Batch {
  Tensor images;  // [B, ...]
  Tensor labels;  // [B]
};

class DataLoader {
 public:
  DataLoader(Tensor images, Tensor labels, int64_t batch_size, bool shuffle = false, bool drop_last = false,
             uint64_t seed = 0);
  DataLoader(const FashionMnist& dataset, int64_t batch_size, bool shuffle = false, bool drop_last = false,
             uint64_t seed = 0);

  int64_t num_samples() const { return n_; }
  int64_t num_batches() const;
  int64_t batch_size() const { return batch_size_; }
  // The epoch the loader is in (0 for the first pass).
  int64_t epoch() const { return epoch_; }
  // The sample order of the current epoch.
  const std::vector<int64_t>& order() const { return order_; }

  // The next batch of the current epoch, or nullopt when the epoch is over.
  std::optional<Batch> next();
  // Starts the next epoch (a new shuffle order).
  void reset();
  // Jumps to the start of `epoch` (the order depends only on seed and epoch).
  void set_epoch(int64_t epoch);

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
  void make_order();
  Tensor images_, labels_;
  int64_t n_ = 0, batch_size_ = 1;
  bool shuffle_ = false, drop_last_ = false;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
  int64_t cursor_ = 0;  // next sample position in order_
  bool started_ = false;
  std::vector<int64_t> order_;
};

}  // namespace graft::data
