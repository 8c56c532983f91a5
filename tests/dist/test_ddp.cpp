// DistributedDataParallel under `mpirun -np 2` (meson runs it so); the [single] cases run in a
// plain process, where the world is one rank and no MPI call may happen.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "dist/ddp.h"
#include "dist/distributed_sampler.h"
#include "dist/dist.h"
#include "graft.h"
#include "nn/checkpoint_helpers.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using dist::DDPOptions;
using dist::DistributedDataParallel;

namespace {

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 16),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 4)});
}

// The same 64 samples on every rank (same seed); each rank takes its contiguous share.
struct Data {
  Tensor x, y;
};
Data make_data(uint64_t seed, int64_t n = 64) {
  manual_seed(seed);
  return {randn({n, 8}), randint(0, 4, {n})};
}
Data shard(const Data& d) {
  const int64_t w = dist::world_size(), r = dist::rank(), per = d.x.size(0) / w;
  return {d.x.narrow(0, r * per, per), d.y.narrow(0, r * per, per)};
}

// Bit-identical on every rank: all_gather and compare each rank's bytes with rank 0's.
bool same_on_all_ranks(const Tensor& t) {
  auto all = dist::all_gather(t.detach().contiguous());
  auto ref = all[0].to_vector<float>();
  for (size_t r = 1; r < all.size(); ++r) {
    auto v = all[r].to_vector<float>();
    if (std::memcmp(v.data(), ref.data(), v.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// Each tensor against one process's (parameters or gradients: float32 sums in another order).
void check_all_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                     std::source_location where = std::source_location::current()) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("tensor " << i);
    check_close(got[i], want[i], {.rtol = 1e-5, .atol = 1e-6}, where);
  }
}

std::vector<Tensor> grads_of(nn::Module& m) {
  std::vector<Tensor> g;
  for (auto& p : m.parameters()) g.push_back(p.grad());
  return g;
}

// One process, the whole batch: the reference every DDP run must match.
std::vector<Tensor> reference_sgd(const Data& d, int steps, std::vector<double>* losses = nullptr) {
  auto model = make_mlp(7);
  optim::SGD opt(model->parameters(), 0.1);
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy((*model)(d.x), d.y);
    loss.backward();
    opt.step();
    if (losses) losses->push_back(loss.item<float>());
  }
  return model->parameters();
}

int64_t collectives() { return dist::process_group(kCPU).num_collectives(); }

}  // namespace

TEST_CASE("DDP: parameters are bit-identical across ranks after construction and after every step", "[ddp]") {
  auto model = make_mlp(100 + static_cast<uint64_t>(dist::rank()));  // different init on each rank
  DistributedDataParallel ddp(model);
  for (auto& p : ddp.parameters()) CHECK(same_on_all_ranks(p));
  optim::SGD opt(ddp.parameters(), 0.05, 0.9);
  Data d = make_data(200 + static_cast<uint64_t>(dist::rank()), 16);  // different data on each rank
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    nn::functional::cross_entropy(ddp(d.x), d.y).backward();
    for (auto& p : ddp.parameters()) REQUIRE(same_on_all_ranks(p.grad()));
    opt.step();
    for (auto& p : ddp.parameters()) REQUIRE(same_on_all_ranks(p));
  }
}

TEST_CASE("DDP: 5 SGD steps on shards of 64 samples match one process with batch 64", "[ddp]") {
  Data d = make_data(1);
  std::vector<double> ref_losses;
  auto ref = reference_sgd(d, 5, &ref_losses);

  DistributedDataParallel ddp(make_mlp(7));
  optim::SGD opt(ddp.parameters(), 0.1);
  Data local = shard(d);
  for (int s = 0; s < 5; ++s) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(ddp(local.x), local.y);
    loss.backward();
    opt.step();
    Tensor reduced = loss.detach().clone();
    dist::all_reduce(reduced, dist::ReduceOp::Avg);
    INFO("step " << s);
    CHECK(reduced.item<float>() == Approx(ref_losses[static_cast<size_t>(s)]).epsilon(1e-5));
  }
  check_all_close(ddp.parameters(), ref);
  CHECK(ddp.stats().steps == 5);
}

TEST_CASE("DDP: a small bucket cap gives the expected buckets, launched in order before backward ends", "[ddp]") {
  // Parameter bytes in reverse order: 2.bias 16, 2.weight 256, 1.bias 64, 1.weight 1024, 0.bias 64,
  // 0.weight 512. First bucket closes at >= 100 bytes, the others at >= 600.
  DistributedDataParallel ddp(make_mlp(3), DDPOptions{.first_bucket_bytes = 100, .bucket_cap_bytes = 600});
  const auto& b = ddp.buckets();
  REQUIRE(b.size() == 3);
  CHECK(b[0].params == std::vector<int64_t>{5, 4});
  CHECK(b[1].params == std::vector<int64_t>{3, 2});
  CHECK(b[2].params == std::vector<int64_t>{1, 0});
  CHECK(b[0].bytes == 272);
  CHECK(b[1].bytes == 1088);
  CHECK(b[2].bytes == 576);
  Data local = shard(make_data(5));
  nn::functional::cross_entropy(ddp(local.x), local.y).backward();
  const auto& st = ddp.stats();
  CHECK(st.launch_order == std::vector<int64_t>{0, 1, 2});
  auto order = tensor(st.launch_order, {3});
  CHECK(same_on_all_ranks(order.to(kFloat32)));
  REQUIRE(st.launched_in_backward.size() == 3);
  CHECK(st.launched_in_backward[0]);
  CHECK(st.launched_in_backward[1]);
  REQUIRE(st.launch_lead_ms.size() == 3);
  CHECK(st.launch_lead_ms[0] > 0);  // on the wire while backward still ran
  CHECK(st.launch_lead_ms[1] > 0);
  CHECK(st.bytes_per_step == 272 + 1088 + 576);
  CHECK(st.bucket_buffer_bytes == (68 + 272 + 144 + 6) * 4);  // gradients, then one used count per parameter
}

TEST_CASE("DDP: no_sync accumulates locally, then one synced step equals one process", "[ddp]") {
  Data d1 = make_data(11), d2 = make_data(12);
  // Reference: two micro-batches of 64 accumulated, one SGD step.
  auto ref_model = make_mlp(9);
  optim::SGD ref_opt(ref_model->parameters(), 0.1);
  nn::functional::cross_entropy((*ref_model)(d1.x), d1.y).backward();
  nn::functional::cross_entropy((*ref_model)(d2.x), d2.y).backward();
  auto ref_grads = grads_of(*ref_model);
  ref_opt.step();

  DistributedDataParallel ddp(make_mlp(9));
  optim::SGD opt(ddp.parameters(), 0.1);
  Data l1 = shard(d1), l2 = shard(d2);
  const int64_t before = collectives();
  {
    auto guard = ddp.no_sync();
    nn::functional::cross_entropy(ddp(l1.x), l1.y).backward();
  }
  CHECK(collectives() == before);  // nothing was communicated inside no_sync
  nn::functional::cross_entropy(ddp(l2.x), l2.y).backward();
  CHECK(collectives() > before);
  check_all_close(grads_of(ddp), ref_grads);
  opt.step();
  check_all_close(ddp.parameters(), ref_model->parameters());
  for (auto& p : ddp.parameters()) CHECK(same_on_all_ranks(p));
}

namespace {
// A model with a buffer that forward does not change (its value says which rank set it last).
struct Buffered : nn::Module {
  Buffered() {
    manual_seed(23);
    fc = register_module("fc", std::make_shared<nn::Linear>(8, 4));
    stat = register_buffer("stat", full({3}, static_cast<double>(dist::rank() + 1)));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
  std::shared_ptr<nn::Linear> fc;
  Tensor stat;
};
}  // namespace

TEST_CASE("DDP: buffers come from rank 0 at construction and at each forward unless broadcast_buffers is off", "[ddp]") {
  Data local = shard(make_data(29));
  for (bool each_forward : {true, false}) {
    auto net = std::make_shared<Buffered>();
    DistributedDataParallel ddp(net, DDPOptions{.broadcast_buffers = each_forward});
    CHECK(net->stat.to_vector<float>() == std::vector<float>(3, 1.0f));  // rank 0's, on every rank
    {
      NoGradGuard no_grad;
      net->stat.fill_(static_cast<double>(10 * (dist::rank() + 1)));
    }
    nn::functional::cross_entropy(ddp(local.x), local.y).backward();
    INFO("broadcast_buffers " << each_forward);
    const float expected = each_forward ? 10.0f : static_cast<float>(10 * (dist::rank() + 1));
    CHECK(net->stat.to_vector<float>() == std::vector<float>(3, expected));
  }
}

TEST_CASE("DDP: autograd::grad through the model neither communicates nor writes .grad", "[ddp]") {
  DistributedDataParallel ddp(make_mlp(17));
  Data local = shard(make_data(19));
  const int64_t before = collectives();
  Tensor loss = nn::functional::cross_entropy(ddp(local.x), local.y);
  auto params = ddp.parameters();
  auto grads = autograd::grad({loss}, params);
  CHECK(collectives() == before);
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(grads[i].defined());
    CHECK_FALSE(params[i].grad().defined());
  }
  // A backward afterwards still reduces as usual.
  nn::functional::cross_entropy(ddp(local.x), local.y).backward();
  CHECK(collectives() > before);
  for (auto& p : params) CHECK(same_on_all_ranks(p.grad()));
}

namespace {
// A parameter used on one rank only (`extra`), and one no rank uses (`unused`, alone in its bucket).
struct Branchy : nn::Module {
  Branchy() {
    manual_seed(21);
    unused = register_module("unused", std::make_shared<nn::Linear>(8, 4));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 16));
    extra = register_module("extra", std::make_shared<nn::Linear>(8, 16));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = fc1->forward(x);
    if (dist::rank() == 1 || dist::world_size() == 1) h = h + extra->forward(x);
    return fc2->forward(h.relu());
  }
  std::shared_ptr<nn::Linear> unused, fc1, extra, fc2;
};
}  // namespace

TEST_CASE("DDP: parameters unused on one rank or on all ranks neither hang nor diverge", "[ddp]") {
  auto net = std::make_shared<Branchy>();
  // Buckets of one parameter each: `unused`'s weight and bias form whole buckets no rank fires.
  DistributedDataParallel ddp(net, DDPOptions{.first_bucket_bytes = 1, .bucket_cap_bytes = 1});
  REQUIRE(ddp.buckets().size() == 8);
  optim::SGD opt(ddp.parameters(), 0.1);
  Data local = shard(make_data(31));
  for (int s = 0; s < 2; ++s) {
    opt.zero_grad();
    nn::functional::cross_entropy(ddp(local.x), local.y).backward();
    CHECK_FALSE(net->unused->weight.grad().defined());
    CHECK_FALSE(net->unused->bias.grad().defined());
    REQUIRE(net->extra->weight.grad().defined());  // used on rank 1: reduced on every rank
    CHECK(same_on_all_ranks(net->extra->weight.grad()));
    opt.step();
    for (auto& p : ddp.parameters()) CHECK(same_on_all_ranks(p));
  }
  if (dist::world_size() == 2) {
    // Rank 0 contributed zeros for `extra`: the average is half of rank 1's gradient.
    Tensor g = net->extra->bias.grad().clone();
    auto all = dist::all_gather(g);
    CHECK(all[0].to_vector<float>() == all[1].to_vector<float>());
  }
}

TEST_CASE("DDP: checkpointed and SaveOnCpu forwards give the same result as plain DDP", "[ddp]") {
  Data local = shard(make_data(41));
  auto run = [&](int mode) {
    auto model = make_mlp(13);
    struct Checkpointed : nn::Module {
      std::shared_ptr<nn::Sequential> seq;
      explicit Checkpointed(std::shared_ptr<nn::Sequential> s) { seq = register_module("seq", std::move(s)); }
      Tensor forward(const Tensor& x) override {
        std::vector<nn::Layer> layers;
        for (const auto& m : *seq) layers.push_back([m](const Tensor& h) { return (*m)(h); });
        return nn::checkpoint_sequential(layers, 2, x);
      }
    };
    std::shared_ptr<nn::Module> wrapped = mode == 1 ? std::shared_ptr<nn::Module>(std::make_shared<Checkpointed>(model))
                                                    : std::shared_ptr<nn::Module>(model);
    DistributedDataParallel ddp(wrapped);
    optim::SGD opt(ddp.parameters(), 0.1);
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad();
      Tensor loss;
      if (mode == 2) {
        autograd::SaveOnCpu offload;
        loss = nn::functional::cross_entropy(ddp(local.x), local.y);
      } else {
        loss = nn::functional::cross_entropy(ddp(local.x), local.y);
      }
      loss.backward();
      opt.step();
    }
    std::vector<Tensor> out;
    for (auto& p : ddp.parameters()) out.push_back(p.detach().clone());
    return out;
  };
  auto plain = run(0), checkpointed = run(1), offloaded = run(2);
  for (size_t i = 0; i < plain.size(); ++i) {
    CHECK(plain[i].to_vector<float>() == checkpointed[i].to_vector<float>());  // same kernels, same order
    CHECK(plain[i].to_vector<float>() == offloaded[i].to_vector<float>());
    CHECK(same_on_all_ranks(checkpointed[i]));
  }
}

TEST_CASE("DDP: models that differ across ranks give a clear error on every rank", "[ddp]") {
  if (dist::world_size() < 2) return;
  manual_seed(3);
  auto shape_mismatch = std::make_shared<nn::Linear>(8, dist::rank() == 0 ? 16 : 17);
  CHECK_THROWS_WITH(DistributedDataParallel(shape_mismatch),
                    Catch::Contains("parameter 0 ('weight' here) is [16, 8] float32 on rank 0 but [17, 8] float32 on rank 1") &&
                        Catch::Contains("every rank must build the same model"));
  auto count_mismatch = std::make_shared<nn::Linear>(8, 4, /*bias=*/dist::rank() == 0);
  CHECK_THROWS_WITH(DistributedDataParallel(count_mismatch),
                    Catch::Contains("rank 0 has 2 parameters that require grad but rank 1 has 1"));
  // The group is still usable afterwards: both ranks threw at the same point.
  Tensor one = ones({1});
  dist::all_reduce(one);
  CHECK(one.item<float>() == 2.0f);
}

TEST_CASE("collectives: all_reduce ops, async work, broadcast, all_gather, non-contiguous tensors", "[ddp]") {
  const int r = dist::rank(), w = dist::world_size();
  Tensor t = full({3}, r + 1.0);
  dist::all_reduce(t);
  CHECK(t.to_vector<float>() == std::vector<float>(3, static_cast<float>(w * (w + 1) / 2)));
  Tensor mx = full({2}, r + 1.0), mn = full({2}, r + 1.0), avg = full({2}, r + 1.0);
  dist::all_reduce(mx, dist::ReduceOp::Max);
  dist::all_reduce(mn, dist::ReduceOp::Min);
  auto work = dist::all_reduce(avg, dist::ReduceOp::Avg, /*async=*/true);
  while (!work->test()) {
  }
  work->wait();  // after test() said done: returns at once, the average stays
  CHECK(dist::local_rank() == r);  // one node: local ranks are the world's
  CHECK(mx.to_vector<float>()[0] == static_cast<float>(w));
  CHECK(mn.to_vector<float>()[0] == 1.0f);
  CHECK(avg.to_vector<float>()[0] == Approx((w + 1) / 2.0));
  // A transposed view goes through a staging copy and lands back in place.
  Tensor base = full({2, 3}, r + 1.0);
  base.select(1, 0).fill_(10.0 * (r + 1));
  Tensor view = base.t();
  dist::all_reduce(view);
  CHECK(base.select(1, 0).to_vector<float>()[0] == Approx(10.0 * w * (w + 1) / 2));
  Tensor b = full({4}, static_cast<double>(r));
  dist::broadcast(b, 0);
  CHECK(b.to_vector<float>() == std::vector<float>(4, 0.0f));
  auto gathered = dist::all_gather(full({2}, static_cast<double>(r)));
  REQUIRE(gathered.size() == static_cast<size_t>(w));
  for (int k = 0; k < w; ++k) CHECK(gathered[static_cast<size_t>(k)].to_vector<float>()[1] == static_cast<float>(k));
  Tensor ints = full({2}, static_cast<double>(r), dtype(kInt64));
  CHECK_THROWS_WITH(dist::all_reduce(ints, dist::ReduceOp::Avg), Catch::Contains("op avg needs a floating tensor"));
  dist::barrier();
}

TEST_CASE("world size 1 without a launcher: DDP trains like the bare model and makes no MPI call", "[single]") {
  REQUIRE_FALSE(dist::launched_by_mpi());
  dist::init();
  CHECK(dist::is_initialized());
  dist::finalize();
  dist::finalize();  // idempotent
  CHECK_FALSE(dist::is_initialized());
  dist::init();
  CHECK(dist::is_initialized());
  CHECK(dist::local_rank() == 0);
  CHECK(dist::world_size() == 1);
  CHECK(dist::rank() == 0);
  Data d = make_data(1);
  auto ref = reference_sgd(d, 3);
  DistributedDataParallel ddp(make_mlp(7));
  optim::SGD opt(ddp.parameters(), 0.1);
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    nn::functional::cross_entropy(ddp(d.x), d.y).backward();
    opt.step();
  }
  for (size_t i = 0; i < ref.size(); ++i) CHECK(ddp.parameters()[i].to_vector<float>() == ref[i].to_vector<float>());
  Tensor t = ones({2});
  dist::all_reduce(t);
  dist::barrier();
  CHECK(dist::all_gather(t).size() == 1);
  CHECK(dist::num_mpi_calls() == 0);
  int mpi_up = 1;
  MPI_Initialized(&mpi_up);  // allowed before MPI_Init; proves nobody initialised MPI behind our back
  CHECK(mpi_up == 0);
}

TEST_CASE("DistributedSampler: the launcher's rank and size by default, and the ranks' shares partition one epoch", "[ddp]") {
  dist::DistributedSampler sampler(10, /*shuffle=*/true, /*seed=*/3);
  CHECK(sampler.rank() == dist::rank());
  CHECK(sampler.num_replicas() == dist::world_size());
  sampler.set_epoch(2);
  auto mine = sampler.indices();
  auto all = dist::all_gather(tensor(mine, {static_cast<int64_t>(mine.size())}));
  std::vector<int64_t> seen;
  for (auto& t : all)
    for (int64_t i : t.to_vector<int64_t>()) seen.push_back(i);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  CHECK(seen.size() == 10);  // every sample once (plus padding repeats)
}
