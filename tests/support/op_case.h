#pragma once
// What the generated per-op tests (op_cases.cpp, op_cases_cuda.cpp; codegen/opgen.py) run. A
// declaration's `check:` line becomes a call here with the op's full name, a function of the
// differentiable inputs, and their values:
//   check: gelu(x, "tanh"); x = real(3, 4)
// -> check_op_case("gelu", [&](in) { const Tensor& x = in[0]; return as_outputs(gelu(x, "tanh")); }, {gen::real(3, 4)})
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "graft.h"
#include "support/check_close.h"

namespace graft::test {

// Input generators of `check:` lines (float64 values; the layouts are the harness's business).
namespace gen {
Tensor real_shape(const Shape& s);      // N(0, 1)
Tensor pos_shape(const Shape& s);       // uniform in [0.5, 1.5]
Tensor nonzero_shape(const Shape& s);   // |x| in [0.3, 0.3 + |N(0, 1)|], random sign
Tensor unit_shape(const Shape& s);      // uniform in [-0.9, 0.9]
template <class... I> Tensor real(I... s) { return real_shape(Shape{static_cast<int64_t>(s)...}); }
template <class... I> Tensor pos(I... s) { return pos_shape(Shape{static_cast<int64_t>(s)...}); }
template <class... I> Tensor nonzero(I... s) { return nonzero_shape(Shape{static_cast<int64_t>(s)...}); }
template <class... I> Tensor unit(I... s) { return unit_shape(Shape{static_cast<int64_t>(s)...}); }
// Not differentiated: int64 values in [0, n) (indices), bool masks.
Tensor index_shape(int64_t n, const Shape& s);
Tensor mask_shape(const Shape& s);
template <class... I> Tensor index(int64_t n, I... s) { return index_shape(n, Shape{static_cast<int64_t>(s)...}); }
template <class... I> Tensor mask(I... s) { return mask_shape(Shape{static_cast<int64_t>(s)...}); }
}  // namespace gen

inline std::vector<Tensor> as_outputs(const Tensor& t) { return {t}; }
inline std::vector<Tensor> as_outputs(std::vector<Tensor> v) { return v; }

using CaseFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
enum CaseFlags : int {
  kNoLayouts = 1,  // contiguous inputs only (the op needs a layout the others break)
  kOnce = 2,       // no gradgradcheck (once differentiable)
  kComposite = 4,  // graft:: composes other ops: the check need not dispatch an op of this name
};

// gradcheck of fn on `values` laid out contiguous, permuted (inputs of 2+ dims) and stepped (every
// other element), each input a leaf; then gradgradcheck on the contiguous ones unless kOnce. Each
// check must dispatch `op` with an input that requires grad, so a case cannot miss its own op.
void check_op_case(const std::string& op, const CaseFn& fn, const std::vector<Tensor>& values, int flags);

// ops:: and graft:: give the same outputs, bit for bit, on the same inputs.
void check_agreement(const CaseFn& ops_fn, const CaseFn& graft_fn, const std::vector<Tensor>& values);

// One row of the op table, as the generated tests see it.
struct DeclaredOp {
  const char* name;      // full name: "add.Tensor"
  const char* nondiff;   // why it has no derivative ("" when it has one)
  const char* no_cuda;   // why it has no CUDA kernel ("" when it has one)
  bool composite;        // graft:: only, composed from other ops (not registered)
  int checks;            // its `check:` lines
};
// Every declared op (generated op_table.cpp), and the ops that have CPU-vs-CUDA cases from their
// declarations (op_cases_cuda.cpp).
const std::vector<DeclaredOp>& declared_ops();
const std::set<std::string>& ops_with_cuda_cases();
// The table and the dispatcher's registry list the same ops; every differentiable op has a case.
void check_table_matches_registry(const std::vector<DeclaredOp>& table);

// CPU vs CUDA: fn on `values` moved to each device, in each of `dtypes`, forward and backward with
// one random output gradient; CUDA's outputs and gradients must match the CPU's within
// cuda_case_tolerance of each result's dtype. The generated cases run float32 and float64 in one
// test case and bfloat16 and float16 in another (tagged [reduced]).
// fn gets the inputs on the device and the run's dtype (for its constant inputs: on_device).
using DeviceCaseFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, Device, DType)>;
void check_cuda_case(const std::string& op, const DeviceCaseFn& fn, const std::vector<Tensor>& values,
                     const std::vector<DType>& dtypes = {kFloat32, kFloat64});
// How close CUDA must be to the CPU for a result of `dtype` (NaN on both sides agrees).
// float32/float64: within 4e-4 / 2e-9, relative or absolute below 1 (the bound tol * (1 + |cpu|)
// this harness used before check_close is within it). bfloat16/float16: both devices compute in float and round once,
// so a float difference in the last bit can flip one rounding, and gradients chain several
// rounded ops; values are O(1) (N(0, 1) inputs), so the bound is twice torch's rtol for the dtype
// (bf16 3.2e-2, fp16 2e-3: about 4 and 2 units in the last place), relative or absolute.
Tolerance cuda_case_tolerance(DType dtype);
// The device check_cuda_case compares with the CPU: CUDA, or the CPU itself for the harness's
// self-check on a machine without a GPU (tests/cuda/test_cuda_vs_cpu.cpp's main).
void set_cuda_case_device(Device dev);
// A constant input on `dev`: indices and masks as they are, a floating one (a loss's class
// weights) in the run's dtype `dt`, which the op requires of it; other constants (shapes,
// numbers) as they are.
Tensor on_device(const Tensor& t, Device dev, DType dt);
template <class T> const T& on_device(const T& v, Device, DType) { return v; }

}  // namespace graft::test
