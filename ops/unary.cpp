// The CPU's whole-tensor fast paths of unary ops (CpuFastPath in ops/elementwise_cpu.h). Every
// unary op's kernel is generated from its declaration (codegen/ops/unary.yaml) and its formula
// (ops/math/unary_math.h); these are tried first on the inputs where something faster applies, and
// compute the very formula of the op's functor.
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/dnnl_utils.h"
#include "ops/elementwise_cpu.h"
#include "ops/kernel_utils.h"
#include "ops/reduced_float.h"
#include "ops/vec_math.h"
#include "runtime/cpu_isa.h"
#include "runtime/memory_format.h"
#include "runtime/parallel.h"

namespace graft::kernels {
namespace {

// Transcendental functions cost tens of cycles per element: split sooner than for a plain add.
constexpr int64_t kMathGrain = kGrainSize / 4;

// Contiguous float32 tanh of at least kDnnlTanhMin elements runs on oneDNN's JIT eltwise: a
// vectorised polynomial within 1 ulp of tanh computed in double (checked on the same grid as
// math::Tanh), about 20x the scalar loop (0.03 vs 0.58 ms for 256K elements here), which matters
// because tanh is a third of a Linear+Tanh layer's forward and checkpointing re-runs forwards.
// Below the threshold the primitive lookup would cost more than the loop; strided inputs and
// float64 take the exact scalar path. A given shape always takes the same path, so a
// recomputation (checkpoint) reproduces the original bits.
constexpr int64_t kDnnlTanhMin = 2048;
constexpr int64_t kKeyEltwiseTanh = 20;  // primitive-cache kind (linalg 1, conv 2-4)

int omp_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

struct EltwisePrimitive : dnnl_utils::CachedPrimitive {
  dnnl::memory::desc md;
};

bool dense_f32(const Tensor& t) { return t.defined() && t.dtype() == kFloat32 && t.is_contiguous(); }

// The exact (erf) GELU and its derivative on contiguous float32: 16 lanes at a time with the very
// templates math::Gelu evaluates (math::gelu_erf, math::gelu_erf_derivative), then the tail
// through the functor itself, so every element gets the functor's bits.
GRAFT_VECTOR_CLONES void gelu_f32(const float* x, float* y, int64_t n) {
  using namespace vec_math;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, math::gelu_erf(load(x + i)));
  const math::Gelu<float> f{};
  for (; i < n; ++i) y[i] = f(x[i]);
}
GRAFT_VECTOR_CLONES void gelu_backward_f32(const float* g, const float* x, float* y, int64_t n) {
  using namespace vec_math;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, load(g + i) * math::gelu_erf_derivative(load(x + i)));
  const math::GeluBackward<float> f{};
  for (; i < n; ++i) y[i] = f(g[i], x[i]);
}

}  // namespace

namespace {
// out = tanh(x) on oneDNN's eltwise (out may be x: the primitive runs in place), where the fast
// path applies; false where it does not.
bool dnnl_tanh(const Tensor& x, const Tensor& out) {
  if (!dense_f32(x) || x.numel() < kDnnlTanhMin) return false;
  namespace du = dnnl_utils;
  du::PrimitiveKey key(kKeyEltwiseTanh);
  key.add(x.numel()).add(omp_max_threads());
  auto p = du::get_or_create_as<EltwisePrimitive>(key, [&] {
    auto e = std::make_shared<EltwisePrimitive>();
    e->md = du::make_desc(Shape{x.numel()}, Shape{1}, kFloat32);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_tanh, e->md),
        du::default_attr(), du::cpu_engine());
    e->prim = dnnl::eltwise_forward(pd);
    e->scratchpad = pd.scratchpad_desc();
    return e;
  });
  du::execute(*p, {{DNNL_ARG_SRC, du::make_memory(p->md, x.data_ptr())},
                   {DNNL_ARG_DST, du::make_memory(p->md, out.data_ptr())}});
  return true;
}
}  // namespace

Tensor CpuFastPath<math::Tanh>::run(const Tensor& x) {
  if (!dense_f32(x) || x.numel() < kDnnlTanhMin) return Tensor();
  Tensor out = new_tensor(x.sizes(), kFloat32, x.device());
  dnnl_tanh(x, out);
  return out;
}

Tensor CpuFastPath<math::Tanh>::run_inplace(const Tensor& self) { return dnnl_tanh(self, self) ? self : Tensor(); }

namespace {
bool dense_16(const Tensor& t) { return t.defined() && is_reduced_floating(t.dtype()) && t.is_contiguous(); }

// y = body(float inputs) for contiguous 16-bit tensors: blocks converted to float, the float32
// vector loop, one rounding back (the functor's bits, rounded once, as the per-element loop).
template <class Body>
Tensor run_16_via_float(const Tensor& y, std::initializer_list<const Tensor*> ins, const Body& body) {
  constexpr int64_t kBlock = 1024;
  dispatch_float_or_reduced(y.dtype(), "gelu", [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      parallel_for(0, y.numel(), kMathGrain, [&](int64_t b, int64_t e) {
        alignas(64) float buf[2][kBlock], out[kBlock];
        for (int64_t i = b; i < e; i += kBlock) {
          const int64_t m = std::min(kBlock, e - i);
          int k = 0;
          for (const Tensor* t : ins) to_float(static_cast<const T*>(t->data_ptr()) + i, buf[k++], m);
          body(buf[0], buf[1], out, m);
          from_float(out, static_cast<T*>(y.data_ptr()) + i, m);
        }
      });
    }
  });
  return y;
}
}  // namespace

Tensor CpuFastPath<math::Gelu>::run(const Tensor& x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::None && dense_16(x))
    return run_16_via_float(new_tensor_like(x), {&x},
                            [](const float* a, const float*, float* y, int64_t m) { gelu_f32(a, y, m); });
  if (approximate != GeluApproximate::None || !dense_f32(x)) return Tensor();
  Tensor y = new_tensor_like(x);
  const float* xp = static_cast<const float*>(x.data_ptr());
  float* yp = static_cast<float*>(y.data_ptr());
  parallel_for(0, x.numel(), kMathGrain, [&](int64_t b, int64_t e) { gelu_f32(xp + b, yp + b, e - b); });
  return y;
}

Tensor CpuFastPath<math::GeluBackward>::run(const Tensor& grad, const Tensor& x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::None && dense_16(grad) && dense_16(x) && grad.dtype() == x.dtype() &&
      grad.sizes() == x.sizes())
    return run_16_via_float(new_tensor_like(x), {&grad, &x}, [](const float* g, const float* a, float* y, int64_t m) {
      gelu_backward_f32(g, a, y, m);
    });
  if (approximate != GeluApproximate::None || !dense_f32(grad) || !dense_f32(x) || grad.sizes() != x.sizes())
    return Tensor();
  Tensor y = new_tensor_like(x);
  const float* gp = static_cast<const float*>(grad.data_ptr());
  const float* xp = static_cast<const float*>(x.data_ptr());
  float* yp = static_cast<float*>(y.data_ptr());
  parallel_for(0, x.numel(), kMathGrain, [&](int64_t b, int64_t e) { gelu_backward_f32(gp + b, xp + b, yp + b, e - b); });
  return y;
}

// ---- relu and its backward on 16-bit bits ----
//
// relu(x) = x < 0 ? 0 : x and threshold_backward(g, x, 0) = x <= 0 ? 0 : g are selections, so in
// bfloat16/float16 the float computation rounded once is the input's own bits, except that a NaN
// leaves the float path canonical (sign | quiet bit, half_types.h): on the raw 16 bits these are
// a few integer operations over 32 lanes, with no conversion. Same bits as the functor (tested).
namespace {

bool dense_16_layout(const Tensor& t) {
  return t.defined() && is_reduced_floating(t.dtype()) && is_non_overlapping_and_dense(t.sizes(), t.strides());
}

// kInf: the dtype's +inf bits (a magnitude above it is NaN); kQnan: its canonical quiet NaN.
template <uint16_t kInf, uint16_t kQnan>
[[gnu::always_inline]] inline uint16_t canonical_nan(uint16_t v) {
  return (v & 0x7FFF) > kInf ? static_cast<uint16_t>((v & 0x8000) | kQnan) : v;
}
template <uint16_t kInf, uint16_t kQnan>
[[gnu::always_inline]] inline void relu_bits(const uint16_t* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = x[i], mag = v & 0x7FFF;
    const bool negative = (v & 0x8000) && mag != 0 && mag <= kInf;  // -0 stays -0, as v < 0 is false
    y[i] = negative ? uint16_t{0} : canonical_nan<kInf, kQnan>(v);
  }
}
template <uint16_t kInf, uint16_t kQnan>
[[gnu::always_inline]] inline void threshold_backward_bits(const uint16_t* g, const uint16_t* x, uint16_t* y,
                                                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = x[i], mag = v & 0x7FFF;
    const bool at_most_zero = mag == 0 || ((v & 0x8000) && mag <= kInf);  // NaN <= 0 is false
    y[i] = at_most_zero ? uint16_t{0} : canonical_nan<kInf, kQnan>(g[i]);
  }
}

using BitsUnary = void (*)(const uint16_t*, uint16_t*, int64_t);
using BitsBinary = void (*)(const uint16_t*, const uint16_t*, uint16_t*, int64_t);
template <uint16_t kInf, uint16_t kQnan>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void relu_bits_avx512(const uint16_t* x, uint16_t* y, int64_t n) {
  relu_bits<kInf, kQnan>(x, y, n);
}
template <uint16_t kInf, uint16_t kQnan>
__attribute__((target("avx2"))) void relu_bits_avx2(const uint16_t* x, uint16_t* y, int64_t n) {
  relu_bits<kInf, kQnan>(x, y, n);
}
template <uint16_t kInf, uint16_t kQnan>
void relu_bits_generic(const uint16_t* x, uint16_t* y, int64_t n) {
  relu_bits<kInf, kQnan>(x, y, n);
}
template <uint16_t kInf, uint16_t kQnan>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void threshold_backward_bits_avx512(const uint16_t* g,
                                                                                       const uint16_t* x, uint16_t* y,
                                                                                       int64_t n) {
  threshold_backward_bits<kInf, kQnan>(g, x, y, n);
}
template <uint16_t kInf, uint16_t kQnan>
__attribute__((target("avx2"))) void threshold_backward_bits_avx2(const uint16_t* g, const uint16_t* x, uint16_t* y,
                                                                  int64_t n) {
  threshold_backward_bits<kInf, kQnan>(g, x, y, n);
}
template <uint16_t kInf, uint16_t kQnan>
void threshold_backward_bits_generic(const uint16_t* g, const uint16_t* x, uint16_t* y, int64_t n) {
  threshold_backward_bits<kInf, kQnan>(g, x, y, n);
}

template <uint16_t kInf, uint16_t kQnan>
BitsUnary pick_relu() {
  return pick_for_isa<BitsUnary>(&relu_bits_avx512<kInf, kQnan>, &relu_bits_avx2<kInf, kQnan>,
                                 &relu_bits_generic<kInf, kQnan>);
}
template <uint16_t kInf, uint16_t kQnan>
BitsBinary pick_threshold_backward() {
  return pick_for_isa<BitsBinary>(&threshold_backward_bits_avx512<kInf, kQnan>,
                                  &threshold_backward_bits_avx2<kInf, kQnan>,
                                  &threshold_backward_bits_generic<kInf, kQnan>);
}
constexpr uint16_t kBf16Inf = 0x7F80, kBf16Qnan = 0x7FC0, kF16Inf = 0x7C00, kF16Qnan = 0x7E00;

const uint16_t* bits_of(const Tensor& t) { return static_cast<const uint16_t*>(t.data_ptr()); }

}  // namespace

namespace {
// relu into y (a new tensor in x's layout, or x itself: each element is read before it is written).
Tensor relu_bits_into(const Tensor& x, const Tensor& y) {
  const BitsUnary f = x.dtype() == kBFloat16 ? pick_relu<kBf16Inf, kBf16Qnan>() : pick_relu<kF16Inf, kF16Qnan>();
  const uint16_t* xp = bits_of(x);
  uint16_t* yp = static_cast<uint16_t*>(y.data_ptr());
  parallel_for(0, x.numel(), kGrainSize, [&](int64_t b, int64_t e) { f(xp + b, yp + b, e - b); });
  return y;
}
bool threshold_bits_apply(const Tensor& grad, const Tensor& x, Scalar threshold) {
  return dense_16_layout(x) && dense_16_layout(grad) && grad.dtype() == x.dtype() && grad.sizes() == x.sizes() &&
         grad.strides() == x.strides() && threshold.to_double() == 0.0;
}
// threshold_backward(grad, x, 0) into y (new, or grad itself).
Tensor threshold_bits_into(const Tensor& grad, const Tensor& x, const Tensor& y) {
  const BitsBinary f = x.dtype() == kBFloat16 ? pick_threshold_backward<kBf16Inf, kBf16Qnan>()
                                              : pick_threshold_backward<kF16Inf, kF16Qnan>();
  const uint16_t *gp = bits_of(grad), *xp = bits_of(x);
  uint16_t* yp = static_cast<uint16_t*>(y.data_ptr());
  parallel_for(0, x.numel(), kGrainSize, [&](int64_t b, int64_t e) { f(gp + b, xp + b, yp + b, e - b); });
  return y;
}
}  // namespace

Tensor CpuFastPath<math::Relu>::run(const Tensor& x) {
  if (!dense_16_layout(x)) return Tensor();
  return relu_bits_into(x, new_tensor_in_format(x, MemoryFormat::Preserve));
}
Tensor CpuFastPath<math::Relu>::run_inplace(const Tensor& self) {
  return dense_16_layout(self) ? relu_bits_into(self, self) : Tensor();
}

Tensor CpuFastPath<math::ThresholdBackward>::run(const Tensor& grad, const Tensor& x, Scalar threshold) {
  if (!threshold_bits_apply(grad, x, threshold)) return Tensor();
  return threshold_bits_into(grad, x, new_tensor_in_format(x, MemoryFormat::Preserve));
}
// In place on the incoming gradient (relu's rule when it holds the only reference to it). An x that
// shares grad's memory other than element for element is left to the general path and its checks.
Tensor CpuFastPath<math::ThresholdBackward>::run_inplace(const Tensor& grad, const Tensor& x, Scalar threshold) {
  if (!threshold_bits_apply(grad, x, threshold) || (x.is_alias_of(grad) && x.data_ptr() != grad.data_ptr()))
    return Tensor();
  return threshold_bits_into(grad, x, grad);
}

// _keep_where_(self, keep): self &= keep ? all ones : 0, on the raw bits. The select the functor
// writes compiles to a branch on a random mask (and is not vectorised: a 1-byte input next to a
// 4-byte output), about 2 ns an element; as an integer AND it is a vector op. Bit-identical to the
// functor: kept elements keep their bits (NaN included), dropped ones become +0.
namespace {
template <class U>
void keep_bits(U* g, const uint8_t* keep, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) g[i] &= static_cast<U>(U{0} - static_cast<U>(keep[i] != 0));
  });
}
}  // namespace

Tensor CpuFastPath<math::KeepWhere>::run_inplace(const Tensor& self, const Tensor& keep) {
  if (!self.defined() || !keep.defined() || keep.dtype() != kBool || !is_floating(self.dtype()) ||
      self.sizes() != keep.sizes() || self.strides() != keep.strides() ||
      !is_non_overlapping_and_dense(self.sizes(), self.strides()))
    return Tensor();
  // Dense with equal strides: both are one block of memory in the same element order.
  const auto* k = static_cast<const uint8_t*>(keep.data_ptr());
  void* g = self.data_ptr();
  switch (self.element_size()) {
    case 2: keep_bits(static_cast<uint16_t*>(g), k, self.numel()); break;
    case 4: keep_bits(static_cast<uint32_t*>(g), k, self.numel()); break;
    case 8: keep_bits(static_cast<uint64_t*>(g), k, self.numel()); break;
    default: return Tensor();
  }
  return self;
}

}  // namespace graft::kernels
