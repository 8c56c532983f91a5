#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "graft.h"
#include "data/data_loader.h"

using namespace graft;
using Catch::Matchers::Contains;

namespace {

// n samples: images [n, 2, 3] where every element of sample i is i; labels i.
std::pair<Tensor, Tensor> samples(int64_t n) {
  Tensor idx = arange(n, dtype(kInt64));
  Tensor images = idx.to(kFloat32).view({n, 1, 1}).expand({n, 2, 3}).contiguous();
  return {images, idx};
}

// The label sequence of one epoch, checking that each image matches its label.
std::vector<int64_t> epoch_labels(data::DataLoader& loader) {
  std::vector<int64_t> out;
  for (const data::Batch& b : loader) {
    auto l = b.labels.to_vector<int64_t>();
    auto img = b.images.to_vector<float>();
    REQUIRE(img.size() == l.size() * 6);
    for (size_t i = 0; i < l.size(); ++i) CHECK(img[i * 6 + 5] == static_cast<float>(l[i]));
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

}  // namespace

TEST_CASE("DataLoader batches in order with the last batch short or dropped") {
  auto [images, labels] = samples(10);
  data::DataLoader loader(images, labels, 4);
  CHECK(loader.num_batches() == 3);
  std::vector<Shape> shapes;
  std::vector<int64_t> seen;
  for (const auto& b : loader) {
    shapes.push_back(b.images.sizes());
    CHECK(b.labels.sizes() == Shape{b.images.size(0)});
    auto l = b.labels.to_vector<int64_t>();
    seen.insert(seen.end(), l.begin(), l.end());
  }
  CHECK(shapes == std::vector<Shape>{{4, 2, 3}, {4, 2, 3}, {2, 2, 3}});
  CHECK(seen == iota(10));

  data::DataLoader dropping(images, labels, 4, false, true);
  CHECK(dropping.num_batches() == 2);
  int64_t count = 0;
  for (const auto& b : dropping) {
    CHECK(b.images.size(0) == 4);
    ++count;
  }
  CHECK(count == 2);

  data::DataLoader exact(images, labels, 5, false, true);
  CHECK(exact.num_batches() == 2);
  data::DataLoader big(images, labels, 64, false, true);
  CHECK(big.num_batches() == 0);
  CHECK(big.begin() == big.end());
}

TEST_CASE("DataLoader shuffling is deterministic per seed and changes every epoch") {
  auto [images, labels] = samples(50);
  data::DataLoader a(images, labels, 8, true, false, 1234);
  data::DataLoader b(images, labels, 8, true, false, 1234);
  data::DataLoader c(images, labels, 8, true, false, 99);

  auto a0 = epoch_labels(a), a1 = epoch_labels(a), a2 = epoch_labels(a);
  auto b0 = epoch_labels(b), b1 = epoch_labels(b);
  auto c0 = epoch_labels(c);
  CHECK(a.epoch() == 2);
  CHECK(a0 == b0);
  CHECK(a1 == b1);
  CHECK(a0 != a1);
  CHECK(a1 != a2);
  CHECK(a0 != c0);
  CHECK(a0 != iota(50));
  for (auto* e : {&a0, &a1, &a2, &c0}) {  // every sample exactly once per epoch
    std::vector<int64_t> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == iota(50));
  }

  // The order depends only on (seed, epoch): jumping to epoch 1 replays it.
  data::DataLoader d(images, labels, 8, true, false, 1234);
  d.set_epoch(1);
  CHECK(epoch_labels(d) == a1);
  // Global seeding does not affect the loader.
  manual_seed(1);
  data::DataLoader e(images, labels, 8, true, false, 1234);
  CHECK(epoch_labels(e) == a0);
}

TEST_CASE("DataLoader next() and reset() walk epochs by hand") {
  auto [images, labels] = samples(7);
  data::DataLoader loader(images, labels, 3, true, true, 5);
  CHECK(loader.num_batches() == 2);
  std::vector<int64_t> first;
  int batches = 0;
  while (auto b = loader.next()) {
    CHECK(b->images.sizes() == Shape{3, 2, 3});
    auto l = b->labels.to_vector<int64_t>();
    first.insert(first.end(), l.begin(), l.end());
    ++batches;
  }
  CHECK(batches == 2);
  CHECK_FALSE(loader.next().has_value());  // stays exhausted until reset
  std::vector<int64_t> expected(loader.order().begin(), loader.order().begin() + 6);
  CHECK(first == expected);
  CHECK(loader.epoch() == 0);
  loader.reset();
  CHECK(loader.epoch() == 1);
  CHECK(loader.next().has_value());
}

TEST_CASE("DataLoader rejects bad arguments") {
  auto [images, labels] = samples(4);
  CHECK_THROWS_WITH(data::DataLoader(images, labels, 0), Contains("batch_size must be positive"));
  CHECK_THROWS_WITH(data::DataLoader(images, labels.slice(0, 0, 3), 2), Contains("different numbers of samples"));
  CHECK_THROWS_WITH(data::DataLoader(Tensor(), labels, 2), Contains("must be defined"));
  CHECK_THROWS_WITH(data::DataLoader(scalar_tensor(1), scalar_tensor(1), 2), Contains("sample dimension"));
}

TEST_CASE("DataLoader with a sampler follows sampler(epoch) each epoch") {
  auto [images, labels] = samples(10);
  std::vector<int64_t> asked;
  // Epoch e visits e, e + 3, ... with one repeat, as a padded distributed share would.
  data::Sampler sampler = [&asked](int64_t epoch) {
    asked.push_back(epoch);
    std::vector<int64_t> order;
    for (int64_t i = epoch; i < 10; i += 3) order.push_back(i);
    order.push_back(epoch);
    return order;
  };
  data::DataLoader loader(images, labels, 2, sampler);
  CHECK(asked == std::vector<int64_t>{0});
  CHECK(loader.num_samples() == 10);
  CHECK(loader.order() == std::vector<int64_t>{0, 3, 6, 9, 0});
  CHECK(loader.num_batches() == 3);
  std::vector<Shape> shapes;
  std::vector<int64_t> seen;
  for (const data::Batch& b : loader) {
    shapes.push_back(b.images.sizes());
    auto l = b.labels.to_vector<int64_t>();
    auto img = b.images.to_vector<float>();
    for (size_t i = 0; i < l.size(); ++i) CHECK(img[i * 6] == static_cast<float>(l[i]));
    seen.insert(seen.end(), l.begin(), l.end());
  }
  CHECK(shapes == std::vector<Shape>{{2, 2, 3}, {2, 2, 3}, {1, 2, 3}});
  CHECK(seen == std::vector<int64_t>{0, 3, 6, 9, 0});

  // The next pass is epoch 1, with the sampler's order for it.
  CHECK(epoch_labels(loader) == std::vector<int64_t>{1, 4, 7, 1});
  CHECK(loader.epoch() == 1);
  loader.set_epoch(2);
  CHECK(loader.order() == std::vector<int64_t>{2, 5, 8, 2});
  CHECK(asked == std::vector<int64_t>{0, 1, 2});

  // drop_last applies to the sampler's order; a captureless lambda picks the sampler constructor.
  data::DataLoader dropping(images, labels, 2, [](int64_t) { return std::vector<int64_t>{9, 8, 7}; }, true);
  CHECK(dropping.num_batches() == 1);
  CHECK(epoch_labels(dropping) == std::vector<int64_t>{9, 8});

  // A sampler that gives the shuffled order reproduces the shuffling loader.
  data::DataLoader shuffled(images, labels, 4, true, false, 77);
  data::DataLoader sampled(images, labels, 4, [](int64_t e) { return data::shuffled_order(10, 77, e); });
  CHECK(epoch_labels(sampled) == epoch_labels(shuffled));
  CHECK(epoch_labels(sampled) == epoch_labels(shuffled));
  CHECK(sampled.epoch() == 1);
}

TEST_CASE("DataLoader rejects a sampler index outside the dataset") {
  auto [images, labels] = samples(5);
  auto bad_from_epoch_1 = [](int64_t epoch) {
    return epoch == 0 ? std::vector<int64_t>{0, 1, 4} : std::vector<int64_t>{2, 5};
  };
  CHECK_THROWS_WITH(data::DataLoader(images, labels, 2, [](int64_t) { return std::vector<int64_t>{0, -1}; }),
                    Contains("sampler(epoch 0) returned index -1 at position 1, outside the dataset's [0, 5)"));
  data::DataLoader loader(images, labels, 2, bad_from_epoch_1);
  CHECK(epoch_labels(loader) == std::vector<int64_t>{0, 1, 4});
  CHECK_THROWS_WITH(loader.set_epoch(1), Contains("returned index 5 at position 1, outside the dataset's [0, 5)"));
  // The failed epoch was not entered: the loader still holds epoch 0's order.
  CHECK(loader.epoch() == 0);
  CHECK(loader.order() == std::vector<int64_t>{0, 1, 4});
  CHECK_THROWS_AS(loader.reset(), Error);
  CHECK_THROWS_WITH(data::DataLoader(images, labels, 2, data::Sampler()), Contains("sampler is an empty"));
  CHECK_THROWS_WITH(data::shuffled_order(-1, 0, 0), Contains("n must be non-negative, got -1"));
}
