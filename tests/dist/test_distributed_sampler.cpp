#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "dist/distributed_sampler.h"
#include "graft.h"
#include "data/data_loader.h"

// Every case uses the explicit (replicas, rank) constructor: none needs MPI or a launcher.

using namespace graft;
using Catch::Matchers::Contains;
using dist::DistributedSampler;
using Indices = std::vector<int64_t>;

namespace {

Indices iota(int64_t n) {
  Indices v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// The ranks' shares of one epoch, rank by rank.
std::vector<Indices> shares(int64_t n, int replicas, bool shuffle, uint64_t seed, bool drop_last, int64_t epoch) {
  std::vector<Indices> out;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

// The global order the shares stride through: position p is rank p % R's (p / R)-th index.
Indices interleave(const std::vector<Indices>& parts) {
  Indices out;
  const size_t len = parts.empty() ? 0 : parts[0].size();
  for (size_t k = 0; k < len; ++k)
    for (const Indices& p : parts) out.push_back(p.at(k));
  return out;
}

Indices sorted(Indices v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("DistributedSampler without shuffle pins torch's strided, padded shares") {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)
  DistributedSampler r0(10, 3, 0, false), r1(10, 3, 1, false), r2(10, 3, 2, false);
  CHECK(r0.num_samples() == 4);
  CHECK(r0.total_size() == 12);
  CHECK(r0.num_replicas() == 3);
  CHECK(r1.rank() == 1);
  CHECK(r0.indices() == Indices{0, 3, 6, 9});
  CHECK(r1.indices() == Indices{1, 4, 7, 0});
  CHECK(r2.indices() == Indices{2, 5, 8, 1});

  // drop_last=True: floor(10 / 3) = 3 each, the order cut to 9.
  DistributedSampler d0(10, 3, 0, false, 0, true), d1(10, 3, 1, false, 0, true), d2(10, 3, 2, false, 0, true);
  CHECK(d0.num_samples() == 3);
  CHECK(d0.total_size() == 9);
  CHECK(d0.indices() == Indices{0, 3, 6});
  CHECK(d1.indices() == Indices{1, 4, 7});
  CHECK(d2.indices() == Indices{2, 5, 8});

  // An even split: drop_last changes nothing.
  CHECK(shares(8, 4, false, 0, false, 0) == std::vector<Indices>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(shares(8, 4, false, 0, true, 0) == shares(8, 4, false, 0, false, 0));
}

TEST_CASE("DistributedSampler pads with whole passes when the padding exceeds the dataset") {
  // torch: range(2), 5 replicas: padding 3 > 2, so indices += (indices * 2)[:3] -> [0, 1, 0, 1, 0].
  CHECK(shares(2, 5, false, 0, false, 0) == std::vector<Indices>{{0}, {1}, {0}, {1}, {0}});
  // n = 1, 4 replicas: every rank gets sample 0.
  CHECK(shares(1, 4, false, 0, false, 0) == std::vector<Indices>{{0}, {0}, {0}, {0}});
  // drop_last with n < replicas: num_samples = 0 (torch: ceil((2 - 5) / 5) = 0).
  DistributedSampler d(2, 5, 3, false, 0, true);
  CHECK(d.num_samples() == 0);
  CHECK(d.total_size() == 0);
  CHECK(d.indices().empty());
  // An empty dataset gives empty shares either way.
  DistributedSampler e(0, 3, 2, true, 7, false);
  CHECK(e.num_samples() == 0);
  CHECK(e.indices().empty());
  // n = 7 over 3: padding 2 repeats the order's start.
  CHECK(shares(7, 3, false, 0, false, 0) == std::vector<Indices>{{0, 3, 6}, {1, 4, 0}, {2, 5, 1}});
}

TEST_CASE("DistributedSampler's shares partition the padded order and cover every index") {
  for (bool shuffle : {false, true}) {
    for (int64_t n : {1, 5, 10, 17, 64}) {
      for (int replicas : {1, 2, 3, 4, 7}) {
        INFO("shuffle " << shuffle << " n " << n << " replicas " << replicas);
        auto parts = shares(n, replicas, shuffle, 11, false, 2);
        const int64_t per = (n + replicas - 1) / replicas;
        for (const Indices& p : parts) CHECK(static_cast<int64_t>(p.size()) == per);
        Indices global = interleave(parts);
        REQUIRE(static_cast<int64_t>(global.size()) == per * replicas);
        // The first n positions are a permutation of [0, n); the rest repeat its start.
        Indices head(global.begin(), global.begin() + n);
        CHECK(sorted(head) == iota(n));
        for (size_t p = static_cast<size_t>(n); p < global.size(); ++p) CHECK(global[p] == global[p % n]);

        auto cut = shares(n, replicas, shuffle, 11, true, 2);
        Indices cut_global = interleave(cut);
        CHECK(static_cast<int64_t>(cut_global.size()) == n / replicas * replicas);
        CHECK(cut_global == Indices(head.begin(), head.begin() + static_cast<int64_t>(cut_global.size())));
      }
    }
  }
}

TEST_CASE("DistributedSampler shuffles per (seed, epoch), as DataLoader does") {
  const int64_t n = 50;
  DistributedSampler a(n, 1, 0, true, 1234), b(n, 1, 0, true, 1234), c(n, 1, 0, true, 99);
  CHECK(a.epoch() == 0);
  Indices a0 = a.indices();
  CHECK(a0 == b.indices());    // deterministic per (seed, epoch)
  CHECK(a0 == a.indices());    // indices() does not advance anything
  CHECK(a0 != c.indices());    // the seed matters
  CHECK(a0 != iota(n));
  CHECK(sorted(a0) == iota(n));
  a.set_epoch(1);
  CHECK(a.epoch() == 1);
  Indices a1 = a.indices();
  CHECK(a1 != a0);             // a new epoch reshuffles
  CHECK(sorted(a1) == iota(n));
  b.set_epoch(1);
  CHECK(b.indices() == a1);
  a.set_epoch(0);
  CHECK(a.indices() == a0);    // an epoch replays
  CHECK(a(1) == a1);           // the call form reads any epoch without set_epoch
  CHECK(a.epoch() == 0);

  // replicas = 1: the same order as a shuffling DataLoader with this seed, epoch by epoch.
  Tensor idx = arange(n, dtype(kInt64));
  data::DataLoader loader(idx.to(kFloat32).view({n, 1}), idx, 8, true, false, 1234);
  for (int64_t e = 0; e < 3; ++e) {
    loader.set_epoch(e);
    a.set_epoch(e);
    CHECK(a.indices() == loader.order());
    CHECK(a.indices() == data::shuffled_order(n, 1234, e));
  }

  // Every rank strides the same global order: rank r is order[r::R].
  const Indices order = data::shuffled_order(n, 1234, 3);
  auto parts = shares(n, 4, true, 1234, false, 3);
  Indices global = interleave(parts);
  CHECK(Indices(global.begin(), global.begin() + n) == order);
}

TEST_CASE("DistributedSampler on 2 ranks sees one process's global batches") {
  // Per-rank batch 4 on 2 ranks against batch 8 on one: global batch k is the same set of samples.
  const int64_t n = 40, seed = 5, epoch = 2;
  Tensor idx = arange(n, dtype(kInt64));
  Tensor images = idx.to(kFloat32).view({n, 1});
  data::DataLoader single(images, idx, 8, true, false, seed);
  single.set_epoch(epoch);

  std::vector<std::vector<Indices>> per_rank;  // [rank][batch]
  for (int r = 0; r < 2; ++r) {
    DistributedSampler s(n, 2, r, true, seed);
    data::DataLoader loader(images, idx, 4, s);
    loader.set_epoch(epoch);
    std::vector<Indices> batches;
    for (const data::Batch& b : loader) batches.push_back(b.labels.to_vector<int64_t>());
    per_rank.push_back(batches);
  }
  int64_t k = 0;
  for (const data::Batch& b : single) {
    REQUIRE(k < static_cast<int64_t>(per_rank[0].size()));
    Indices both = per_rank[0][k];
    both.insert(both.end(), per_rank[1][k].begin(), per_rank[1][k].end());
    CHECK(sorted(both) == sorted(b.labels.to_vector<int64_t>()));
    ++k;
  }
  CHECK(k == 5);
  CHECK(per_rank[0].size() == 5);
}

TEST_CASE("DistributedSampler rejects bad arguments") {
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Contains("num_replicas must be at least 1"));
  CHECK_THROWS_WITH(DistributedSampler(10, -2, 0), Contains("got -2"));
  CHECK_THROWS_WITH(DistributedSampler(10, 3, 3), Contains("rank 3 is outside [0, num_replicas = 3)"));
  CHECK_THROWS_WITH(DistributedSampler(10, 3, -1), Contains("rank -1"));
  CHECK_THROWS_WITH(DistributedSampler(-1, 2, 0), Contains("dataset_size must be non-negative, got -1"));
  DistributedSampler s(10, 2, 1);
  CHECK_THROWS_WITH(s.set_epoch(-1), Contains("epoch must be non-negative, got -1"));
  CHECK_THROWS_WITH(s(-3), Contains("epoch must be non-negative, got -3"));
  CHECK_THROWS_AS(DistributedSampler(10, 0, 0), Error);
}
