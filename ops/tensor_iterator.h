#pragma once
// TensorIterator: the one elementwise iteration plan for every device (unary, binary, ternary,
// comparisons, fills, in-place updates). Argument checks, broadcasting, dtype conversion, overlap
// separation and dim coalescing happen here once; a device supplies only the loop: the CPU runs
// for_each(), CUDA turns shape()/stride()/data() into its kernels' geometry (cuda/elementwise_cuda.h).
// The copies it makes go through kernels::device_copy, on the operands' own device.
//
// Use:
//   TensorIterator it("add");
//   it.add_input(a, kFloat32).add_input(b, kFloat32).build(kFloat32);   // allocates the output
//   it.for_each(elementwise_loop<float, float, float>([](float x, float y) { return x + y; }));
//   return it.output();
// or, for an in-place op, `it.add_output(self).add_input(self).add_input(b).build()`, or for a
// fill, `it.add_output(self).build()` (no inputs: the output's own shape).
//
// Invariants:
// - Operand 0 is the output; inputs follow in the order they were added (at most 3).
// - An output allocated by build() has the broadcast shape of the inputs (NumPy rules). It is
//   row-major unless the first input of that full shape is dense in a permuted layout
//   (channels-last): then it takes that input's strides, so NHWC activations stay NHWC through
//   relu, add and their backward. A given output must already have exactly that shape, or build() throws
//   "output with shape [3] doesn't match the broadcast shape [2, 3]". A given output that has a
//   stride-0 (expanded) dim is rejected: several elements would be written through one address.
// - Inputs keep their dtype unless add_input() names another one, in which case build() works
//   on a converted contiguous copy. So a typed loop always sees exactly the dtypes it asked for.
// - An input that shares memory with the output but does not lie exactly on it (x.add_(x.t()),
//   x.add_(x[0])) is replaced by a copy first, so a loop never reads what it already wrote.
//   An input identical to the output (x.add_(x)) is read in place: elementwise loops read
//   element i before writing element i. Overlap is judged on the byte range each operand can
//   touch, negative strides included (a flipped view reaches below its data pointer).
// - After build(), the iteration space has ndim() >= 1 dims, innermost first, with size-1 dims
//   dropped and adjacent dims merged wherever every operand's strides allow it. When all operands
//   are contiguous with one shape, or all share one dense permuted layout, this is a single flat dim
//   (the fast path; build() does no broadcasting work at all then).
// - The loop contract: loop(char** data, const int64_t* strides, int64_t n) processes n elements;
//   operand k's element i is at data[k] + i * strides[k] (strides in bytes, 0 for a broadcast
//   operand). The loop must not keep the pointers. It is called from several threads at once
//   when numel() > grain, each call on a disjoint range of output elements.
// - Beyond the output allocation (and copies for dtype conversion / overlap), building and
//   running an iterator does no heap work: shapes and strides live in fixed arrays, which is why
//   tensors are limited to kIterMaxDims dims.
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/kernel_utils.h"
#include "ops/scalar_math.h"
#include "runtime/parallel.h"

namespace graft::kernels {

inline constexpr int kIterMaxOperands = 4;  // the output and up to 3 inputs (where, addcmul_)
inline constexpr int kIterMaxDims = 25;

// A non-owning, non-allocating reference to a loop, so the N-d walker can live in the .cpp file.
class LoopRef {
 public:
  template <class F>
  LoopRef(const F& f)  // NOLINT: implicit on purpose
      : obj_(&f), call_([](const void* o, char** d, const int64_t* s, int64_t n) { (*static_cast<const F*>(o))(d, s, n); }) {}
  void operator()(char** d, const int64_t* s, int64_t n) const { call_(obj_, d, s, n); }

 private:
  const void* obj_;
  void (*call_)(const void*, char**, const int64_t*, int64_t);
};

class TensorIterator {
 public:
  // `op` names the op in error messages; it must outlive the iterator (pass a string literal).
  explicit TensorIterator(const char* op) : op_(op) {}
  TensorIterator(const TensorIterator&) = delete;
  TensorIterator& operator=(const TensorIterator&) = delete;

  // An existing output, written in place. Call before build(); without it build(dtype) allocates.
  TensorIterator& add_output(const Tensor& out);
  // An input read as its own dtype, or converted to `as` first.
  TensorIterator& add_input(const Tensor& in);
  TensorIterator& add_input(const Tensor& in, DType as);

  // Broadcasts, checks, allocates the output (of `out_dtype`) if none was given, coalesces dims.
  TensorIterator& build(DType out_dtype);
  // For a given output.
  TensorIterator& build();

  const Tensor& output() const { return ops_[0]; }
  const Tensor& input(int i) const { return ops_[1 + i]; }
  int64_t numel() const { return numel_; }
  int ndim() const { return ndim_; }
  int noperands() const { return nops_; }
  const char* op() const { return op_; }
  // The coalesced plan, for devices that run their own loop: dim d (innermost first) has shape(d)
  // elements; operand k's element at index i along d is stride(d, k) * i bytes further on.
  int64_t shape(int d) const { return shape_[d]; }
  int64_t stride(int d, int k) const { return strides_[d][k]; }
  char* data(int k) const { return base_[k]; }

  // Runs `loop` over every element, splitting the flat range over threads when numel > grain.
  template <class Loop>
  void for_each(const Loop& loop, int64_t grain = kGrainSize) const {
    if (numel_ == 0) return;
    if (ndim_ == 1) {
      parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) {
        char* ptrs[kIterMaxOperands];
        for (int k = 0; k < nops_; ++k) ptrs[k] = base_[k] + b * strides_[0][k];
        loop(ptrs, strides_[0], e - b);
      });
      return;
    }
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { walk(LoopRef(loop), b, e); });
  }

 private:
  void walk(LoopRef loop, int64_t begin, int64_t end) const;
  void build_impl(bool allocate, DType out_dtype);
  bool try_flat(bool allocate, DType out_dtype);
  void separate_overlapping_inputs();
  void reorder_by_output();
  void coalesce();

  const char* op_;
  int nops_ = 1;  // operand 0 is the output
  bool have_output_ = false;
  std::array<Tensor, kIterMaxOperands> ops_;
  char* base_[kIterMaxOperands] = {};
  int ndim_ = 0;
  int64_t numel_ = 0;
  int64_t shape_[kIterMaxDims] = {};                    // innermost first
  int64_t strides_[kIterMaxDims][kIterMaxOperands] = {};  // bytes; strides_[d][k] for operand k
};

// ---- typed loops ----

// Wraps an elementwise function `Out f(In...)` as a TensorIterator loop. The contiguous branch is
// a plain indexed loop the compiler can vectorise; for two inputs, a broadcast (stride-0) operand
// next to a contiguous one is hoisted out of the loop; everything else takes the strided branch.
template <class Out, class... In, class F>
auto elementwise_loop(F f) {
  return [f](char** data, const int64_t* strides, int64_t n) {
    constexpr size_t N = sizeof...(In);
    [&]<size_t... I>(std::index_sequence<I...>) {
      using Ins = std::tuple<In...>;
      Out* out = reinterpret_cast<Out*>(data[0]);
      bool out_contig = strides[0] == static_cast<int64_t>(sizeof(Out));
      if (out_contig && ((strides[I + 1] == static_cast<int64_t>(sizeof(std::tuple_element_t<I, Ins>))) && ...)) {
        std::tuple<const In*...> in{reinterpret_cast<const In*>(data[I + 1])...};
        for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i]...);
        return;
      }
      if constexpr (N == 2) {
        using A = std::tuple_element_t<0, Ins>;
        using B = std::tuple_element_t<1, Ins>;
        if (out_contig && strides[1] == 0 && strides[2] == static_cast<int64_t>(sizeof(B))) {
          A a = *reinterpret_cast<const A*>(data[1]);
          const B* b = reinterpret_cast<const B*>(data[2]);
          for (int64_t i = 0; i < n; ++i) out[i] = f(a, b[i]);
          return;
        }
        if (out_contig && strides[2] == 0 && strides[1] == static_cast<int64_t>(sizeof(A))) {
          const A* a = reinterpret_cast<const A*>(data[1]);
          B b = *reinterpret_cast<const B*>(data[2]);
          for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b);
          return;
        }
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(data[0] + i * strides[0]) =
            f(*reinterpret_cast<const In*>(data[I + 1] + i * strides[I + 1])...);
    }(std::make_index_sequence<N>{});
  };
}

// ---- PyTorch's type promotion ----
//
// Operands take part with three priorities, as in PyTorch's result_type: tensors with at least one
// dim, then 0-dim tensors, then Scalars. A lower-priority operand only matters when it is of a higher
// category (bool < integral < floating): uint8[3] + int64 0-dim stays uint8, int32[3] + float64
// 0-dim is float64, int32[3] + 2.5 is float32 (a floating Scalar counts as float32). Within one
// priority, promote_types decides. So `x * scalar_tensor(2.0, kFloat64)` keeps a float32 x float32.

// The dtype of operands of category-priority `higher` combined with lower-priority ones of dtype
// `lower` (PyTorch's combine_categories).
DType combine_categories(DType higher, DType lower);
// Tensor-tensor, both with dims (or both 0-dim): the higher of the two.
inline DType result_type(DType a, DType b) { return promote_types(a, b); }
// Tensor-tensor with PyTorch's priorities: a 0-dim tensor next to one with dims is lower priority.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Tensor& b, const Tensor& c);
// Tensor-Scalar: the Scalar (as bool, int64 or float32) only matters when it is of a higher category.
DType result_type(DType t, const Scalar& s);
// The dtype a floating op (exp, sqrt, true division) returns: integers and bool give float32.
inline DType floating_result(DType t) { return is_floating(t) ? t : kFloat32; }
// Whether a result of dtype `from` may be written into a tensor of dtype `to` (no float into
// integers, nothing but bool into bool), as torch.can_cast.
bool can_cast(DType from, DType to);
// "op: result type Float can't be cast to the desired output type Long"
void check_inplace_cast(const char* op, DType result, const Tensor& self);
// Whether the byte ranges two strided tensors can touch intersect (negative strides reach below
// the data pointer; empty tensors touch nothing). Conservative: true does not mean an element is shared.
bool ranges_overlap(const Tensor& a, const Tensor& b);
// A written-to tensor must not be expanded: one address would receive several results.
void check_no_internal_overlap(const char* op, const Tensor& out);

// ---- scalar math shared by the elementwise kernels ----

using scalar_math::int_pow;
using scalar_math::int_pow_signed;

}  // namespace graft::kernels
