// NcclProcessGroup (dist/nccl_process_group.h). One source, two executables:
// - dist_test_nccl_unique_id (GRAFT_NCCL_UNIQUE_ID_ONLY): what needs no GPU (the unique id, the
//   argument checks made before any device is touched). Runs wherever graft_dist has NCCL.
// - dist_test_nccl_world1: a world of one on cuda:0, every collective through the real NCCL.
//   Exits 77 (meson's SKIPPED) without a CUDA device: a GPU test must never report PASSED on a
//   machine that could not run it, and Catch2 v2 has no SKIP, so this file has its own main.
// A world of one still runs NCCL's kernels, its stream and its events, so the stream ordering,
// the staging copies and the Work lifetimes are exercised; that every rank gets the same bits is
// what the multi-rank DDP suite checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <vector>

#include "dist/nccl_process_group.h"
#include "graft.h"
#include "support/catch_session.h"
#ifndef GRAFT_NCCL_UNIQUE_ID_ONLY
#include "cuda/cuda_context.h"
#endif

using namespace graft;
using Catch::Matchers::Contains;
using dist::ReduceOp;

#ifdef GRAFT_NCCL_UNIQUE_ID_ONLY

TEST_CASE("nccl_unique_id returns NCCL's 128 bytes, fresh on every call") {
  std::vector<uint8_t> a = dist::nccl_unique_id();
  std::vector<uint8_t> b = dist::nccl_unique_id();
  REQUIRE(a.size() == 128);
  REQUIRE(b.size() == 128);
  CHECK(std::any_of(a.begin(), a.end(), [](uint8_t x) { return x != 0; }));
  CHECK(a != b);  // each call opens its own rendezvous
}

TEST_CASE("make_nccl_process_group checks its arguments before touching a device") {
  std::vector<uint8_t> id = dist::nccl_unique_id();
  CHECK_THROWS_WITH(dist::make_nccl_process_group(2, 2, 0, id), Contains("rank 2 is not a rank of a world of size 2"));
  CHECK_THROWS_WITH(dist::make_nccl_process_group(0, 0, 0, id), Contains("world of size 0"));
  CHECK_THROWS_WITH(dist::make_nccl_process_group(0, 1, 1 << 20, id), Contains("no device cuda:1048576"));
}

int main(int argc, char* argv[]) { return graft::test::run_catch_session(argc, argv); }

#else  // the GPU executable

namespace {

// One communicator for most cases: ncclCommInitRank costs tenths of a second. Made in main and
// destroyed there, before the CUDA runtime shuts down.
std::unique_ptr<dist::ProcessGroup> g_group;
dist::ProcessGroup& group() { return *g_group; }

const TensorOptions kOnGpu = TensorOptions{}.device(Device(DeviceType::CUDA, 0));

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("a world of one: the group describes itself") {
  CHECK(group().name() == "nccl");
  CHECK(group().rank() == 0);
  CHECK(group().size() == 1);
}

TEST_CASE("a world of one: all_reduce sum, avg, max and min leave a CUDA float tensor as it was") {
  manual_seed(11);
  Tensor t = randn({4, 5}, kOnGpu);
  const std::vector<float> before = values(t);
  const void* data = t.data_ptr();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    INFO("op " << dist::reduce_op_name(op));
    int64_t n = group().num_collectives();
    auto work = group().all_reduce(t, op);
    CHECK(group().num_collectives() == n + 1);
    work->wait();
    CHECK(values(t) == before);
    CHECK(t.data_ptr() == data);  // in place
    // wait() only ordered the caller's stream; once the device is idle the event is done.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(work->test());
  }
}

TEST_CASE("a world of one: a non-contiguous tensor goes through a staging copy and back") {
  manual_seed(12);
  Tensor base = randn({6, 3}, kOnGpu);
  Tensor t = base.t();  // [3, 6], non-contiguous
  REQUIRE_FALSE(t.is_contiguous());
  const std::vector<float> before = values(t);
  group().all_reduce(t, ReduceOp::Avg)->wait();
  CHECK(values(t) == before);
  CHECK(values(base.t()) == before);  // written through the view into the caller's storage
  group().broadcast(t, 0)->wait();
  CHECK(values(t) == before);
}

TEST_CASE("a world of one: int64 and bool reduce through their NCCL types") {
  Tensor i = arange(0, 10, 1, kOnGpu.dtype(kInt64));
  group().all_reduce(i, ReduceOp::Sum)->wait();
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  group().all_reduce(i, ReduceOp::Max)->wait();
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor b = tensor(std::vector<bool>{true, false, true}, {3}, kOnGpu);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    group().all_reduce(b, op)->wait();
    CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  }
  Tensor d = randn({7}, kOnGpu.dtype(kFloat64));
  const std::vector<double> before = d.to_vector<double>();
  group().all_reduce(d, ReduceOp::Avg)->wait();
  CHECK(d.to_vector<double>() == before);
}

TEST_CASE("a world of one: an async all_reduce polled with test() finishes") {
  Tensor t = full({1 << 16}, 2.5, kOnGpu);
  auto work = group().all_reduce(t, ReduceOp::Avg);
  int polls = 0;
  while (!work->test()) {
    ++polls;
    REQUIRE(polls < 100000000);  // a collective of one rank cannot hang; this bounds a bug
  }
  work->wait();  // returns at once after test() saw it done
  std::vector<float> v = values(t);
  CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 2.5f; }));
}

TEST_CASE("a world of one: collectives are ordered after the caller's stream, and wait() orders it after them") {
  cudaStream_t side = cuda::create_stream();
  {
    cuda::StreamGuard on_side(side, 0);
    // Queued on the side stream just before the collective: NCCL must read 3, not what the
    // allocator's fresh block held.
    Tensor t = empty({1 << 20}, kOnGpu);
    t.fill_(3.0);
    auto work = group().all_reduce(t, ReduceOp::Sum);
    work->wait();
    t.mul_(2.0);  // on the side stream, after the wait
    std::vector<float> v = values(t);
    CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 6.0f; }));
  }
  REQUIRE(cudaStreamSynchronize(side) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(side) == cudaSuccess);
}

TEST_CASE("a world of one: broadcast from rank 0 is the identity; another src is refused") {
  manual_seed(13);
  Tensor t = randn({8}, kOnGpu);
  const std::vector<float> before = values(t);
  int64_t n = group().num_collectives();
  group().broadcast(t, 0)->wait();
  CHECK(values(t) == before);
  CHECK(group().num_collectives() == n + 1);
  CHECK_THROWS_WITH(group().broadcast(t, 1), Contains("src 1 is not a rank of a world of size 1"));
  CHECK(group().num_collectives() == n + 1);
}

TEST_CASE("a world of one: all_gather returns one tensor equal to the input, in new memory") {
  manual_seed(14);
  Tensor t = randn({3, 4}, kOnGpu);
  int64_t n = group().num_collectives();
  std::vector<Tensor> all = group().all_gather(t);
  CHECK(group().num_collectives() == n + 1);
  REQUIRE(all.size() == 1);
  CHECK(all[0].sizes() == t.sizes());
  CHECK(all[0].dtype() == t.dtype());
  CHECK(all[0].device() == t.device());
  CHECK(values(all[0]) == values(t));
  CHECK_FALSE(all[0].is_alias_of(t));
  // A non-contiguous input is gathered in its logical order.
  Tensor nc = t.t();
  CHECK(values(group().all_gather(nc)[0]) == values(nc));
}

TEST_CASE("a world of one: empty tensors and barrier") {
  Tensor e = empty({0, 3}, kOnGpu);
  int64_t n = group().num_collectives();
  group().all_reduce(e, ReduceOp::Sum)->wait();
  group().broadcast(e, 0)->wait();
  std::vector<Tensor> all = group().all_gather(e);
  REQUIRE(all.size() == 1);
  CHECK(all[0].sizes() == Shape{0, 3});
  group().barrier();
  group().barrier();
  CHECK(group().num_collectives() == n + 5);  // empty collectives still count: every rank skips together
}

TEST_CASE("a world of one: errors name the op, shape, dtype and device") {
  Tensor cpu = zeros({2, 3});
  CHECK_THROWS_WITH(group().all_reduce(cpu, ReduceOp::Sum),
                    Contains("all_reduce") && Contains("[2, 3] float32 cpu") && Contains("cuda:0"));
  CHECK_THROWS_WITH(group().broadcast(cpu, 0), Contains("broadcast") && Contains("[2, 3] float32 cpu"));
  CHECK_THROWS_WITH(group().all_gather(cpu), Contains("all_gather") && Contains("[2, 3] float32 cpu"));
  Tensor i = zeros({4}, kOnGpu.dtype(kInt64));
  CHECK_THROWS_WITH(group().all_reduce(i, ReduceOp::Avg),
                    Contains("all_reduce") && Contains("avg") && Contains("[4] int64 cuda:0"));
  Tensor b = zeros({4}, kOnGpu.dtype(kBool));
  CHECK_THROWS_WITH(group().all_reduce(b, ReduceOp::Avg), Contains("avg") && Contains("[4] bool cuda:0"));
  CHECK_THROWS_WITH(dist::make_nccl_process_group(0, 1, 0, std::vector<uint8_t>(5)), Contains("unique id has 5 bytes"));
}

TEST_CASE("a Work outlives its group, and an unwaited Work finishes when destroyed") {
  manual_seed(15);
  Tensor t = randn({1 << 12}, kOnGpu);
  Tensor s = randn({64, 32}, kOnGpu).t();  // staged: its copy back happens at the Work's finish
  const std::vector<float> t_before = values(t), s_before = values(s);
  std::shared_ptr<dist::Work> kept;
  {
    // A second communicator beside the global one, destroyed while its Works are alive.
    auto second = dist::make_nccl_process_group(0, 1, 0, dist::nccl_unique_id());
    kept = second->all_reduce(t, ReduceOp::Avg);
    second->all_reduce(s, ReduceOp::Avg);  // dropped at once: finishes in its destructor
    second->barrier();
    CHECK(second->num_collectives() == 3);
  }
  kept->wait();
  kept.reset();
  CHECK(values(t) == t_before);
  CHECK(values(s) == s_before);
  // The memory those collectives used was tagged with the NCCL stream; freeing and reusing it
  // after the group is gone must work (the stream outlives every group).
  t = Tensor();
  s = Tensor();
  Tensor again = full({1 << 12}, 1.0, kOnGpu);
  group().all_reduce(again, ReduceOp::Sum)->wait();
  std::vector<float> v = values(again);
  CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 1.0f; }));
}

int main(int argc, char* argv[]) {
  if (cuda_device_count() == 0) {
    std::cout << "no CUDA device: skipped\n";
    return 77;
  }
  g_group = dist::make_nccl_process_group(0, 1, 0, dist::nccl_unique_id());
  int rc = graft::test::run_catch_session(argc, argv);
  g_group.reset();
  return rc;
}

#endif  // GRAFT_NCCL_UNIQUE_ID_ONLY
