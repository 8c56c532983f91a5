#include "support/op_case.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <sstream>

#include "support/stack_args.h"

namespace graft::test {

namespace gen {
namespace {
const TensorOptions kF64 = dtype(kFloat64);
}
Tensor real_shape(const Shape& s) { return randn(s, kF64); }
Tensor pos_shape(const Shape& s) {
  autograd::NoGradGuard ng;
  return rand(s, kF64) + 0.5;
}
Tensor nonzero_shape(const Shape& s) {
  autograd::NoGradGuard ng;
  Tensor r = randn(s, kF64);
  return sign(r) * (abs(r) + 0.3);
}
Tensor unit_shape(const Shape& s) {
  autograd::NoGradGuard ng;
  return rand(s, kF64) * 1.8 - 0.9;
}
Tensor index_shape(int64_t n, const Shape& s) { return randint(0, n, s); }
Tensor mask_shape(const Shape& s) {
  autograd::NoGradGuard ng;
  return rand(s).gt(0.5);
}
}  // namespace gen

namespace {

// Records which ops were dispatched with grad mode on and an input that requires grad.
class OpRecorder final : public DispatchMode {
 public:
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (autograd::is_grad_enabled() && any_tensor_arg(args, [](const Tensor& t) { return t.requires_grad(); }))
      seen.insert(op.schema.full_name());
    return next(args);
  }
  std::set<std::string> seen;
};

enum class Layout { Contiguous, Permuted, Stepped };
const char* layout_name(Layout l) {
  return l == Layout::Contiguous ? "contiguous" : l == Layout::Permuted ? "permuted" : "stepped";
}

// A leaf with `v`'s shape and values in layout `l`.
Tensor laid_out(const Tensor& v, Layout l) {
  autograd::NoGradGuard ng;
  Tensor t;
  if (l == Layout::Permuted && v.dim() >= 2) {
    Shape rev(static_cast<size_t>(v.dim()));
    for (int64_t d = 0; d < v.dim(); ++d) rev[d] = v.dim() - 1 - d;
    t = v.permute(rev).contiguous().permute(rev);
  } else if (l == Layout::Stepped && v.dim() >= 1 && v.numel() > 0) {
    Shape wide = v.sizes();
    wide.back() *= 2;
    Tensor big = full(wide, 1e3, dtype(v.dtype()));
    t = big.slice(-1, 0, wide.back(), 2);
    t.copy_(v);
  } else {
    t = v.clone();
  }
  t.requires_grad_();
  return t;
}

bool any_multi_dim(const std::vector<Tensor>& v) {
  return std::any_of(v.begin(), v.end(), [](const Tensor& t) { return t.dim() >= 2; });
}

}  // namespace

void check_op_case(const std::string& op, const CaseFn& fn, const std::vector<Tensor>& values, int flags) {
  std::vector<Layout> layouts{Layout::Contiguous};
  if (!(flags & kNoLayouts)) {
    if (any_multi_dim(values)) layouts.push_back(Layout::Permuted);
    layouts.push_back(Layout::Stepped);
  }
  for (Layout l : layouts) {
    INFO(op << ", " << layout_name(l) << " inputs");
    std::vector<Tensor> in;
    for (const Tensor& v : values) in.push_back(laid_out(v, l));
    OpRecorder rec;
    {
      DispatchModeGuard guard(&rec);
      CHECK(autograd::gradcheck(fn, in));
      if (l == Layout::Contiguous && !(flags & kOnce)) CHECK(autograd::gradgradcheck(fn, in));
    }
    INFO("ops this case differentiated: " << [&] {
      std::string s;
      for (auto& n : rec.seen) s += n + " ";
      return s;
    }());
    if (!(flags & kComposite)) CHECK(rec.seen.count(op) == 1);
  }
}

void check_agreement(const CaseFn& ops_fn, const CaseFn& graft_fn, const std::vector<Tensor>& values) {
  std::vector<Tensor> in;
  for (const Tensor& v : values) in.push_back(laid_out(v, Layout::Contiguous));
  std::vector<Tensor> a = ops_fn(in), b = graft_fn(in);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("output " << i);
    REQUIRE(a[i].defined() == b[i].defined());
    if (!a[i].defined()) continue;
    CHECK(a[i].sizes() == b[i].sizes());
    CHECK(a[i].dtype() == b[i].dtype());
    CHECK(ops::eq(a[i], b[i].detach()).logical_not().sum().item<int64_t>() == 0);
  }
}

void check_table_matches_registry(const std::vector<DeclaredOp>& table) {
  std::set<std::string> registered, declared;
  for (const Op* op : registered_ops()) registered.insert(op->schema.full_name());
  std::vector<std::string> undeclared, unregistered, unchecked, unexplained;
  for (const DeclaredOp& d : table) {
    declared.insert(d.name);
    if (!d.composite && !registered.count(d.name)) unregistered.push_back(d.name);
    if (!*d.nondiff && d.checks == 0) unchecked.push_back(d.name);
  }
  for (const std::string& r : registered)
    if (!declared.count(r)) undeclared.push_back(r);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  INFO("registered but not declared in codegen/ops/*.yaml: " << join(undeclared));
  CHECK(undeclared.empty());
  INFO("declared but not registered: " << join(unregistered));
  CHECK(unregistered.empty());
  INFO("differentiable without a check: " << join(unchecked));
  CHECK(unchecked.empty());
}

Tensor on_device(const Tensor& t, Device dev, DType dt) {
  return is_floating(t.dtype()) ? t.to(dt).to(dev) : t.to(dev);
}

namespace {
Device g_case_device = kCUDA;
}  // namespace

void set_cuda_case_device(Device dev) { g_case_device = dev; }

Tolerance cuda_case_tolerance(DType dtype) {
  Tolerance t;
  switch (dtype) {
    case DType::Float64: t = Tolerance::within(2e-9); break;
    case DType::Float32: t = Tolerance::within(4e-4); break;
    case DType::BFloat16:
    case DType::Float16: t = Tolerance::within(2 * *default_tolerance(dtype).rtol); break;
    default: t = Tolerance::exact(); break;  // integers and bool (indices, masks, counts)
  }
  t.equal_nan = true;  // NaN on both devices is agreement
  return t;
}

void check_cuda_case(const std::string& op, const DeviceCaseFn& fn, const std::vector<Tensor>& values,
                     const std::vector<DType>& dtypes) {
  const Device dev = g_case_device;
  for (DType dt : dtypes) {
    INFO(op << " in " << dt);
    std::vector<Tensor> cpu_in, dev_in;
    for (const Tensor& v : values) {
      cpu_in.push_back(v.to(dt).detach().requires_grad_());
      dev_in.push_back(v.to(dt).to(dev).detach().requires_grad_());
    }
    std::vector<Tensor> cpu_out = fn(cpu_in, kCPU, dt), dev_out = fn(dev_in, dev, dt);
    REQUIRE(cpu_out.size() == dev_out.size());
    std::vector<Tensor> roots_cpu, roots_dev, grads_cpu, grads_dev;
    for (size_t i = 0; i < cpu_out.size(); ++i) {
      INFO("output " << i);
      REQUIRE(dev_out[i].defined() == cpu_out[i].defined());
      if (!cpu_out[i].defined()) continue;
      CHECK(dev_out[i].device() == dev);
      check_close(dev_out[i], cpu_out[i], cuda_case_tolerance(cpu_out[i].dtype()));
      if (cpu_out[i].requires_grad()) {
        Tensor g = randn(cpu_out[i].sizes(), dtype(cpu_out[i].dtype()));
        roots_cpu.push_back(cpu_out[i]);
        roots_dev.push_back(dev_out[i]);
        grads_cpu.push_back(g);
        grads_dev.push_back(g.to(dev));
      }
    }
    if (roots_cpu.empty()) continue;
    auto gc = autograd::grad(roots_cpu, cpu_in, grads_cpu, std::nullopt, false, true);
    auto gg = autograd::grad(roots_dev, dev_in, grads_dev, std::nullopt, false, true);
    for (size_t i = 0; i < gc.size(); ++i) {
      INFO("gradient of input " << i);
      REQUIRE(gg[i].defined() == gc[i].defined());
      if (gc[i].defined()) check_close(gg[i], gc[i], cuda_case_tolerance(gc[i].dtype()));
    }
  }
}

}  // namespace graft::test
