#include "data/data_loader.h"

#include <numeric>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "data/fashion_mnist.h"
#include "runtime/error.h"

namespace graft::data {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// xoshiro256**: small, fast, and identical on every platform (unlike std distributions).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    for (auto& w : s_) w = splitmix64(x);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, bound), without modulo bias.
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t v;
    do v = next();
    while (v >= limit);
    return v % bound;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  GRAFT_CHECK(n >= 0, "shuffled_order: n must be non-negative, got ", n);
  GRAFT_CHECK(epoch >= 0, "shuffled_order: epoch must be non-negative, got ", epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates from the back: this exact draw sequence is what pins a (seed, epoch)'s order, on
  // every platform and for the loader and DistributedSampler alike.
  if (n > 1) {
    Rng rng(seed, static_cast<uint64_t>(epoch));
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

std::vector<int64_t> random_draws(int64_t n, int64_t count, uint64_t seed, int64_t epoch) {
  GRAFT_CHECK(n >= 1 && count >= 0 && epoch >= 0, "random_draws: need n >= 1, count >= 0 and epoch >= 0, got n ", n,
              ", count ", count, ", epoch ", epoch);
  std::vector<int64_t> draws(static_cast<size_t>(count));
  // Another stream than shuffled_order's for the same (seed, epoch).
  Rng rng(seed ^ 0x5DEECE66DULL, static_cast<uint64_t>(epoch));
  for (auto& d : draws) d = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
  return draws;
}

DataLoader::DataLoader(Tensor images, Tensor labels, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed)
    : images_(std::move(images)), labels_(std::move(labels)), batch_size_(batch_size), shuffle_(shuffle),
      drop_last_(drop_last), seed_(seed) {
  GRAFT_CHECK(images_.defined() && labels_.defined(), "DataLoader: images and labels must be defined tensors");
  GRAFT_CHECK(images_.dim() >= 1 && labels_.dim() >= 1, "DataLoader: images ", describe(images_), " and labels ",
              describe(labels_), " need a sample dimension");
  GRAFT_CHECK(images_.size(0) == labels_.size(0), "DataLoader: images ", describe(images_), " and labels ",
              describe(labels_), " hold different numbers of samples");
  GRAFT_CHECK(batch_size_ > 0, "DataLoader: batch_size must be positive, got ", batch_size_);
  n_ = images_.size(0);
  make_order(0);
}

DataLoader::DataLoader(const FashionMnist& dataset, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed)
    : DataLoader(dataset.images(), dataset.labels(), batch_size, shuffle, drop_last, seed) {}

DataLoader::DataLoader(Tensor images, Tensor labels, int64_t batch_size, Sampler sampler, bool drop_last)
    // The delegated constructor checks the tensors; its [0, n) order is replaced by sampler(0).
    : DataLoader(std::move(images), std::move(labels), batch_size, false, drop_last, 0) {
  GRAFT_CHECK(static_cast<bool>(sampler), "DataLoader: the sampler is an empty std::function");
  sampler_ = std::move(sampler);
  make_order(0);
}

DataLoader::DataLoader(const FashionMnist& dataset, int64_t batch_size, Sampler sampler, bool drop_last)
    : DataLoader(dataset.images(), dataset.labels(), batch_size, std::move(sampler), drop_last) {}

DataLoader::DataLoader(int64_t num_samples, BatchFn make_batch, int64_t batch_size, Sampler sampler, bool drop_last)
    : n_(num_samples), batch_size_(batch_size), drop_last_(drop_last), sampler_(std::move(sampler)),
      make_batch_(std::move(make_batch)) {
  GRAFT_CHECK(n_ >= 0, "DataLoader: num_samples must be non-negative, got ", n_);
  GRAFT_CHECK(batch_size_ > 0, "DataLoader: batch_size must be positive, got ", batch_size_);
  GRAFT_CHECK(static_cast<bool>(make_batch_) && static_cast<bool>(sampler_),
              "DataLoader: make_batch and sampler must both be set");
  make_order(0);
}

int64_t DataLoader::num_batches() const {
  const auto m = static_cast<int64_t>(order_.size());
  return drop_last_ ? m / batch_size_ : (m + batch_size_ - 1) / batch_size_;
}

void DataLoader::make_order(int64_t epoch) {
  // Built aside and committed with the epoch only once checked, so a sampler that throws or
  // returns a bad index leaves the loader in the epoch it was in.
  std::vector<int64_t> order;
  if (sampler_) {
    order = sampler_(epoch);
    for (size_t i = 0; i < order.size(); ++i)
      GRAFT_CHECK(order[i] >= 0 && order[i] < n_, "DataLoader: sampler(epoch ", epoch, ") returned index ",
                  order[i], " at position ", i, ", outside the dataset's [0, ", n_, ")");
  } else if (shuffle_) {
    order = shuffled_order(n_, seed_, epoch);
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  epoch_ = epoch;
  order_ = std::move(order);
  cursor_ = 0;
  started_ = false;
}

void DataLoader::set_epoch(int64_t epoch) {
  GRAFT_CHECK(epoch >= 0, "DataLoader: epoch must be non-negative, got ", epoch);
  make_order(epoch);
}

void DataLoader::seek(int64_t epoch, int64_t position) {
  GRAFT_CHECK(epoch >= 0 && position >= 0, "DataLoader::seek: epoch and position must be non-negative, got epoch ",
              epoch, ", position ", position);
  const int64_t was_epoch = epoch_, was_cursor = cursor_;
  const bool was_started = started_;
  make_order(epoch);
  if (position > static_cast<int64_t>(order_.size())) {
    const auto size = order_.size();
    make_order(was_epoch);
    cursor_ = was_cursor;
    started_ = was_started;
    GRAFT_ERROR("DataLoader::seek: position ", position, " is past the end of epoch ", epoch, "'s order (", size,
                " samples)");
  }
  cursor_ = position;
  started_ = position > 0;
}

void DataLoader::reset() { set_epoch(epoch_ + 1); }

std::optional<Batch> DataLoader::next() {
  started_ = true;
  const auto m = static_cast<int64_t>(order_.size());
  const int64_t remaining = m - cursor_;
  if (remaining <= 0 || (drop_last_ && remaining < batch_size_)) {
    cursor_ = m;
    return std::nullopt;
  }
  const int64_t b = std::min(batch_size_, remaining);
  autograd::NoGradGuard no_grad;
  Batch batch;
  if (make_batch_) {
    std::vector<int64_t> idx(order_.begin() + cursor_, order_.begin() + cursor_ + b);
    batch = make_batch_(graft::tensor(idx, {b}, TensorOptions{}.dtype(kInt64)));
  } else if (!shuffle_ && !sampler_) {  // order_ is [0, n): a slice, no gather
    batch.images = images_.slice(0, cursor_, cursor_ + b).contiguous();
    batch.labels = labels_.slice(0, cursor_, cursor_ + b).contiguous();
  } else {
    std::vector<int64_t> idx(order_.begin() + cursor_, order_.begin() + cursor_ + b);
    Tensor index = graft::tensor(idx, {b}, TensorOptions{}.dtype(kInt64).device(images_.device()));
    batch.images = graft::index_select(images_, 0, index);
    Tensor lindex = labels_.device() == images_.device() ? index : index.to(labels_.device());
    batch.labels = graft::index_select(labels_, 0, lindex);
  }
  cursor_ += b;
  return batch;
}

DataLoader::Iterator DataLoader::begin() {
  if (started_) reset();
  return Iterator(this);
}

}  // namespace graft::data
