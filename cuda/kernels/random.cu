// Random fills: one thread per Philox block, writing the block's 1, 2 or 4 elements. The
// arithmetic after the draw uses explicit round-to-nearest intrinsics (no fused multiply-add), so
// uniform, integer and Bernoulli values are bit-identical to the CPU's; normal values go through
// the device's log1p/cos, which may differ from the host libm in the last bit.
#include "cuda/kernels/random.h"

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/philox.cuh"

namespace graft::cuda {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

__device__ __forceinline__ double affine(double a, double scale, double u) { return __dadd_rn(a, __dmul_rn(scale, u)); }

__device__ __forceinline__ double box_muller(double u1, double u2) {
  return __dmul_rn(::sqrt(__dmul_rn(-2.0, ::log1p(-u1))), ::cos(__dmul_rn(kTwoPi, u2)));
}

template <class T>
__device__ __forceinline__ T from_bit(bool b) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) return T(b ? 1.0f : 0.0f);
  else return static_cast<T>(b ? 1 : 0);
}

enum class Dist { Uniform, Normal, RandomInt, Bernoulli };

struct DistParams {
  double a = 0, b = 0;  // uniform: from, to - from; normal: mean, std; bernoulli: p
  int64_t low = 0;
  uint64_t range = 1;
};

// bfloat16 and float16 draw float32's numbers and round them once, as the CPU (ops/random.cpp).
template <class T>
inline constexpr bool kFloatStream = std::is_same_v<T, float> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

template <Dist D, class T>
constexpr int per_block() {
  if constexpr (D == Dist::Uniform) return kFloatStream<T> ? 4 : 2;
  else if constexpr (D == Dist::Normal) return kFloatStream<T> ? 2 : 1;
  else if constexpr (D == Dist::RandomInt) return 2;
  else return 4;
}

// out[n]: block j covers elements [j * per_block, (j + 1) * per_block).
template <Dist D, class T>
__global__ void __launch_bounds__(kElemThreads)
    philox_fill_kernel(T* out, int64_t n, int64_t nblocks, uint64_t seed, uint64_t base, DistParams p) {
  constexpr int kPer = per_block<D, T>();
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = tid; j < nblocks; j += stride) {
    uint4 w = philox(seed, base + static_cast<uint64_t>(j));
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      int64_t i = j * kPer + e;
      if (i >= n) break;
      if constexpr (D == Dist::Uniform) {
        if constexpr (kFloatStream<T>) out[i] = T(static_cast<float>(affine(p.a, p.b, unit_float(word(w, e)))));
        else out[i] = static_cast<T>(affine(p.a, p.b, unit_double(word(w, 2 * e), word(w, 2 * e + 1))));
      } else if constexpr (D == Dist::Normal) {
        if constexpr (kFloatStream<T>) {
          double z = box_muller(unit_float(word(w, 2 * e)), unit_float(word(w, 2 * e + 1)));
          out[i] = T(static_cast<float>(affine(p.a, p.b, z)));
        } else {
          out[i] = static_cast<T>(affine(p.a, p.b, box_muller(unit_double(w.x, w.y), unit_double(w.z, w.w))));
        }
      } else if constexpr (D == Dist::RandomInt) {
        uint64_t v = (static_cast<uint64_t>(word(w, 2 * e)) << 32) | word(w, 2 * e + 1);
        int64_t r = p.low + static_cast<int64_t>(v % p.range);
        if constexpr (std::is_same_v<T, bool>) out[i] = r != 0;
        else if constexpr (kFloatStream<T>) out[i] = T(static_cast<float>(r));
        else out[i] = static_cast<T>(r);
      } else {
        out[i] = from_bit<T>(static_cast<double>(unit_float(word(w, e))) < p.a);
      }
    }
  }
}

template <Dist D, class T>
void launch_fill_kernel(void* out, int64_t n, uint64_t seed, uint64_t base, const DistParams& p, cudaStream_t stream,
                        const char* name) {
  if (n <= 0) return;
  constexpr int kPer = per_block<D, T>();
  int64_t nblocks = (n + kPer - 1) / kPer;
  philox_fill_kernel<D, T><<<grid_for(nblocks), kElemThreads, 0, stream>>>(static_cast<T*>(out), n, nblocks, seed,
                                                                            base, p);
  check_launch(name);
}

// ---- multinomial ----

// The float64 uniform of element e of a multinomial draw: block base + e / 2, words 2 (e % 2) and
// 2 (e % 2) + 1, as ops/random.cpp.
__device__ __forceinline__ double multinomial_uniform(uint64_t seed, uint64_t base, int64_t e) {
  const uint4 w = philox(seed, base + static_cast<uint64_t>(e) / 2);
  const int k = 2 * static_cast<int>(e % 2);
  return unit_double(word(w, k), word(w, k + 1));
}

__global__ void __launch_bounds__(kElemThreads)
    multinomial_scan_kernel(const double* w, int64_t rows, int64_t C, double* cum, unsigned long long* found) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = tid; r < rows; r += stride) {
    unsigned long long invalid = ~0ull, infinite = ~0ull;
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t e = r * C + c;
      const double v = w[e];
      if (!(v >= 0) && invalid == ~0ull) invalid = static_cast<unsigned long long>(e);
      if (isinf(v) && v > 0 && infinite == ~0ull) infinite = static_cast<unsigned long long>(e);
      sum = __dadd_rn(sum, v);
      if (cum) cum[e] = sum;
    }
    if (invalid != ~0ull) atomicMin(found, invalid);
    if (infinite != ~0ull) atomicMin(found + 1, infinite);
    if (sum == 0) atomicMin(found + 2, static_cast<unsigned long long>(r));
  }
}

__global__ void __launch_bounds__(kElemThreads)
    multinomial_keys_kernel(const double* w, double* keys, int64_t n, uint64_t seed, uint64_t base) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = tid; e < n; e += stride)
    keys[e] = scalar_math::multinomial_key(w[e], multinomial_uniform(seed, base, e));
}

__global__ void __launch_bounds__(kElemThreads) multinomial_draw_kernel(const double* cum, int64_t n, int64_t C,
                                                                         int64_t num_samples, uint64_t seed,
                                                                         uint64_t base, int64_t* out) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = tid; e < n; e += stride)
    out[e] = scalar_math::multinomial_pick(cum + (e / num_samples) * C, C, multinomial_uniform(seed, base, e));
}

}  // namespace

void launch_multinomial_scan(const double* w, int64_t rows, int64_t C, double* cum, unsigned long long* found,
                             cudaStream_t stream) {
  if (rows <= 0) return;
  multinomial_scan_kernel<<<grid_for(rows), kElemThreads, 0, stream>>>(w, rows, C, cum, found);
  check_launch("multinomial (scan)");
}

void launch_multinomial_keys(const double* w, double* keys, int64_t n, uint64_t seed, uint64_t base,
                             cudaStream_t stream) {
  if (n <= 0) return;
  multinomial_keys_kernel<<<grid_for(n), kElemThreads, 0, stream>>>(w, keys, n, seed, base);
  check_launch("multinomial (keys)");
}

void launch_multinomial_draw(const double* cum, int64_t rows, int64_t C, int64_t num_samples, uint64_t seed,
                             uint64_t base, int64_t* out, cudaStream_t stream) {
  const int64_t n = rows * num_samples;
  if (n <= 0) return;
  multinomial_draw_kernel<<<grid_for(n), kElemThreads, 0, stream>>>(cum, n, C, num_samples, seed, base, out);
  check_launch("multinomial (draw)");
}

void launch_uniform(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double from, double to,
                    cudaStream_t stream) {
  DistParams p;
  p.a = from;
  p.b = to - from;
  if (dtype == DType::Float32) launch_fill_kernel<Dist::Uniform, float>(out, n, seed, base, p, stream, "uniform_");
  else if (dtype == DType::Float64) launch_fill_kernel<Dist::Uniform, double>(out, n, seed, base, p, stream, "uniform_");
  else if (dtype == DType::BFloat16) launch_fill_kernel<Dist::Uniform, BFloat16>(out, n, seed, base, p, stream, "uniform_");
  else if (dtype == DType::Float16) launch_fill_kernel<Dist::Uniform, Half>(out, n, seed, base, p, stream, "uniform_");
  else elementwise_internal_error("launch_uniform", dtype, 0);
}

void launch_normal(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double mean, double std,
                   cudaStream_t stream) {
  DistParams p;
  p.a = mean;
  p.b = std;
  if (dtype == DType::Float32) launch_fill_kernel<Dist::Normal, float>(out, n, seed, base, p, stream, "normal_");
  else if (dtype == DType::Float64) launch_fill_kernel<Dist::Normal, double>(out, n, seed, base, p, stream, "normal_");
  else if (dtype == DType::BFloat16) launch_fill_kernel<Dist::Normal, BFloat16>(out, n, seed, base, p, stream, "normal_");
  else if (dtype == DType::Float16) launch_fill_kernel<Dist::Normal, Half>(out, n, seed, base, p, stream, "normal_");
  else elementwise_internal_error("launch_normal", dtype, 0);
}

void launch_random_int(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, int64_t low, uint64_t range,
                       cudaStream_t stream) {
  DistParams p;
  p.low = low;
  p.range = range;
  visit_dtype(dtype, [&]<class T>() { launch_fill_kernel<Dist::RandomInt, T>(out, n, seed, base, p, stream, "random_"); });
}

void launch_bernoulli(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double prob,
                      cudaStream_t stream) {
  DistParams p;
  p.a = prob;
  visit_dtype(dtype, [&]<class T>() { launch_fill_kernel<Dist::Bernoulli, T>(out, n, seed, base, p, stream, "bernoulli_"); });
}

}  // namespace graft::cuda
