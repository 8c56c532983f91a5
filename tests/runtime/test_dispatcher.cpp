#include <catch2/catch.hpp>

#include <map>

#include "graft.h"
#include "ops/kernel_utils.h"
#include "support/fake_device.h"

using namespace graft;

namespace {

// Counts every op that reaches it, then lets the call continue.
struct CountingMode : DispatchMode {
  std::map<std::string, int> counts;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    counts[op.schema.full_name()]++;
    return next(args);
  }
};

// Replaces the result of every `fill_` with a tensor of 7s, and rewrites `full`'s value argument.
struct RewritingMode : DispatchMode {
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (op.schema.name == "full") args[1] = Scalar(7.0);
    return next(args);
  }
};

// Answers `clone` itself without reaching the kernel.
struct ShortCircuitMode : DispatchMode {
  int kernels_skipped = 0;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (op.schema.name == "clone") {
      ++kernels_skipped;
      Tensor src = std::get<Tensor>(args[0]);
      return {ops::full(src.sizes(), -1.0, src.dtype())};  // issued from inside the mode: not seen by it again
    }
    return next(args);
  }
};

}  // namespace

TEST_CASE("op schemas parse names, overloads, writes and aliases") {
  OpSchema s = OpSchema::parse("add_.Tensor(Tensor(a!) self, Tensor other, Scalar alpha) -> Tensor(a!)");
  CHECK(s.name == "add_");
  CHECK(s.overload == "Tensor");
  CHECK(s.full_name() == "add_.Tensor");
  REQUIRE(s.args.size() == 3);
  CHECK(s.args[0].type == "Tensor");
  CHECK(s.args[0].is_write);
  CHECK(s.args[2].type == "Scalar");
  CHECK(s.written_args == std::vector<int>{0});
  REQUIRE(s.aliases.size() == 1);
  CHECK(s.aliases[0] == std::pair<int, int>{0, 0});
  CHECK(s.is_inplace());

  OpSchema v = OpSchema::parse("transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)");
  CHECK(v.is_view());
  CHECK_FALSE(v.is_inplace());

  OpSchema m = OpSchema::parse("max.dim(Tensor self, int dim, bool keepdim) -> (Tensor, Tensor)");
  CHECK(m.returns.size() == 2);
  CHECK(m.str() == "max.dim(Tensor self, int dim, bool keepdim) -> (Tensor, Tensor)");

  CHECK_THROWS_WITH(OpSchema::parse("broken"), Catch::Contains("cannot parse"));
}

TEST_CASE("every registered op has a schema and a CPU kernel") {
  auto ops_list = registered_ops();
  REQUIRE(ops_list.size() > 10);
  for (const Op* op : ops_list) {
    INFO(op->schema.name);
    CHECK(op->has_schema);
    CHECK(op->kernels[static_cast<int>(DeviceType::CPU)] != nullptr);
  }
}

TEST_CASE("a counting dispatch mode sees every op call, including views and factories") {
  CountingMode mode;
  {
    DispatchModeGuard g(&mode);
    Tensor a = ops::zeros({2, 3});
    Tensor b = ops::transpose(a, 0, 1);
    ops::fill_(b, 2.0);
    Tensor c = ops::clone(b);
    (void)c;
  }
  CHECK(mode.counts["full"] == 1);
  CHECK(mode.counts["transpose"] == 1);
  CHECK(mode.counts["fill_"] == 1);
  CHECK(mode.counts["clone"] == 1);
  // Outside the guard nothing is counted.
  ops::zeros({1});
  CHECK(mode.counts["full"] == 1);
}

TEST_CASE("a dispatch mode can rewrite an op's arguments") {
  RewritingMode mode;
  Tensor t;
  {
    DispatchModeGuard g(&mode);
    t = ops::full({3}, 1.0);
  }
  CHECK(t.to_vector<float>() == std::vector<float>{7, 7, 7});
}

TEST_CASE("a dispatch mode can replace an op's result, and ops it issues skip it") {
  ShortCircuitMode mode;
  Tensor x = ops::full({2}, 5.0);
  Tensor y;
  {
    DispatchModeGuard g(&mode);
    y = ops::clone(x);
  }
  CHECK(mode.kernels_skipped == 1);
  CHECK(y.to_vector<float>() == std::vector<float>{-1, -1});
}

TEST_CASE("nested dispatch modes run innermost first and both see the call") {
  CountingMode outer, inner;
  {
    DispatchModeGuard g1(&outer);
    DispatchModeGuard g2(&inner);
    CHECK(dispatch_mode_depth() == 2);
    ops::zeros({2});
  }
  CHECK(dispatch_mode_depth() == 0);
  CHECK(outer.counts["full"] == 1);
  CHECK(inner.counts["full"] == 1);
}

TEST_CASE("the dispatcher bumps the version of written arguments exactly once") {
  Tensor x = ops::zeros({4});
  CHECK(x.version() == 0);
  ops::fill_(x, 1.0);
  CHECK(x.version() == 1);
  Tensor v = ops::slice(x, 0, 1, 3);
  ops::fill_(v, 2.0);
  CHECK(x.version() == 2);
  CHECK(v.version() == 2);
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 2, 1});
}

namespace {
Tensor first_of_two(const Tensor& a, const Tensor& b) { return a; }
GRAFT_DEFINE_OP("graft_test_two(Tensor a, Tensor b) -> Tensor");
GRAFT_KERNEL("graft_test_two", CPU, first_of_two);
GRAFT_KERNEL("graft_test_two", CUDA, first_of_two);
// A cross-device op with a target Device argument, as `_to_copy`: each kernel names itself.
Tensor target_cpu(const Tensor& a, Device) { return ops::full({1}, 1.0); }
Tensor target_cuda(const Tensor& a, Device) { return ops::full({1}, 2.0); }
GRAFT_DEFINE_OP("graft_test_to(Tensor a, Device device) -> Tensor", /*cross_device=*/true);
GRAFT_KERNEL("graft_test_to", CPU, target_cpu);
GRAFT_KERNEL("graft_test_to", CUDA, target_cuda);
GRAFT_DEFINE_OP("graft_test_to_same(Tensor a, Device device) -> Tensor");
GRAFT_KERNEL("graft_test_to_same", CPU, target_cpu);
GRAFT_KERNEL("graft_test_to_same", CUDA, target_cuda);
// A CPU-only op: every library op has a CUDA kernel when graft is built with CUDA.
GRAFT_DEFINE_OP("graft_test_cpu_only(Tensor a) -> Tensor");
Tensor identity(const Tensor& a) { return a; }
GRAFT_KERNEL("graft_test_cpu_only", CPU, identity);
}  // namespace

TEST_CASE("ops on tensors from different devices are an error naming both devices") {
  testing::FakeCudaGuard fake;
  Tensor a = ops::zeros({2});
  Tensor b = kernels::new_tensor({2}, kFloat32, Device("cuda:0"));
  CHECK(b.device() == Device("cuda:0"));
  CHECK(fake.allocator().stats().num_allocs == 1);
  GRAFT_OP_HANDLE(op, "graft_test_two");
  CHECK_THROWS_WITH(call_op(op, a, b), Catch::Contains("graft_test_two: expected all tensors to be on the same "
                                                       "device, but found at least two devices, cpu and cuda:0"));
  // Same-device calls pick the kernel of that device.
  CHECK(call_op(op, b, b)[0].is_same(b));
  // An op with no kernel for the device says so.
  GRAFT_OP_HANDLE(cpu_only, "graft_test_cpu_only");
  CHECK(call_op(cpu_only, a)[0].is_same(a));
  CHECK_THROWS_WITH(call_op(cpu_only, b), Catch::Contains("graft_test_cpu_only: no kernel for device cuda:0"));
}

TEST_CASE("a copy to a CUDA Device argument runs the CUDA kernel, whatever device its tensor is on") {
  testing::FakeCudaGuard fake;
  Tensor cpu = ops::zeros({2});
  Tensor cuda = kernels::new_tensor({2}, kFloat32, Device("cuda:0"));
  auto which = [](const Op& op, const Tensor& t, Device d) { return call_op(op, t, d)[0].to_vector<float>()[0]; };
  GRAFT_OP_HANDLE(to, "graft_test_to");
  CHECK(which(to, cpu, Device("cuda:0")) == 2.0f);  // the transfer that `x.to(kCUDA)` makes
  CHECK(which(to, cuda, Device("cpu")) == 2.0f);
  CHECK(which(to, cpu, Device("cpu")) == 1.0f);
  // Ops that are not copies keep choosing by their tensors.
  GRAFT_OP_HANDLE(same, "graft_test_to_same");
  CHECK(which(same, cpu, Device("cuda:0")) == 1.0f);
  // The library's own transfer is declared cross-device, so it takes the same route.
  CHECK(op_handle("_to_copy").schema.cross_device);
}

TEST_CASE("unknown ops and missing kernels give clear errors") {
  Op& op = op_handle("graft_test_missing_op");
  Stack s;
  CHECK_THROWS_WITH(dispatch(op, s), Catch::Contains("unknown op 'graft_test_missing_op'"));
}
