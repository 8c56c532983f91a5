// copy_, fill_, casts, clone/contiguous, device transfer and tril/triu (CPU side).
#include <algorithm>
#include <cstring>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/reduced_float.h"
#include "runtime/dispatcher.h"
#include "runtime/memory_format.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {

// One element converted as PyTorch's copy_ converts it:
// - to bool: nonzero (NaN included) is true;
// - to bfloat16/float16: through float, then rounded once (a float64 source rounds twice, as c10);
// - floating to uint8: through int64, then wrapped (-1.0 -> 255, 300.5 -> 44), as c10's
//   static_cast_with_inter_type; floating to int32/int64: truncated (runtime/scalar.h's float_to_integral);
// - integers to narrower integers wrap (two's complement).
template <class D, class S>
inline D cast_value(S v) {
  constexpr bool s_floating = std::is_floating_point_v<S> || std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>;
  if constexpr (std::is_same_v<D, S>) return v;  // a copy keeps the bits (a 16-bit NaN's payload too)
  else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>) return static_cast<float>(v) != 0.0f;
    else return v != S(0);  // NaN is true, as PyTorch
  }
  else if constexpr (std::is_same_v<S, bool>) return static_cast<D>(static_cast<int>(v));
  else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>) return D(static_cast<float>(v));
  else if constexpr (s_floating && std::is_integral_v<D>) return float_to_integral<D>(static_cast<double>(v));
  else return static_cast<D>(v);
}

// float32 <-> bfloat16/float16 contiguous: the vectorised converters, a row per task.
template <class D, class S>
bool convert_contiguous(D* d, const S* s, int64_t n) {
  constexpr bool to16 = std::is_same_v<S, float> && (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>);
  constexpr bool from16 = std::is_same_v<D, float> && (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>);
  if constexpr (to16 || from16) {
    parallel_for(0, n, kGrainSize * 4, [&](int64_t b, int64_t e) {
      if constexpr (to16) from_float(s + b, d + b, e - b);
      else to_float(s + b, d + b, e - b);
    });
    return true;
  }
  return false;
}

// One contiguous run of n elements: memcpy, the vectorised 16-bit converters, or a cast loop the
// compiler vectorises (unit strides it can see).
template <class D, class S>
void convert_run(D* d, const S* s, int64_t n) {
  constexpr bool to16 = std::is_same_v<S, float> && (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>);
  constexpr bool from16 = std::is_same_v<D, float> && (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>);
  if constexpr (std::is_same_v<D, S>) std::memcpy(d, s, static_cast<size_t>(n) * sizeof(D));
  else if constexpr (to16) from_float(s, d, n);
  else if constexpr (from16) to_float(s, d, n);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = cast_value<D>(s[i]);
}

// dst[i] = cast(src[i]) over dst's shape, reading src through `src_strides` (already broadcast).
void strided_copy(const Tensor& dst, const Tensor& src, const Shape& src_strides) {
  dispatch_all_dtypes(dst.dtype(), "copy_", [&]<class D>() {
    dispatch_all_dtypes(src.dtype(), "copy_", [&]<class S>() {
      D* d = static_cast<D*>(dst.data_ptr());
      const S* s = static_cast<const S*>(src.data_ptr());
      int64_t n = dst.numel();
      // Same dense layout on both sides (row-major, or both channels-last): one flat run.
      const bool flat = (dst.is_contiguous() && src.is_contiguous() && src.sizes() == dst.sizes()) ||
                        (src.sizes() == dst.sizes() && src_strides == dst.strides() &&
                         is_non_overlapping_and_dense(dst.sizes(), dst.strides()));
      if (flat) {
        if constexpr (std::is_same_v<D, S>) {
          parallel_for(0, n, kGrainSize * 4, [&](int64_t b, int64_t e) {
            std::memcpy(d + b, s + b, static_cast<size_t>(e - b) * sizeof(D));
          });
        } else if (!convert_contiguous(d, s, n)) {
          parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) d[i] = cast_value<D>(s[i]);
          });
        }
        return;
      }
      const int64_t nd = dst.dim();
      const int64_t inner = nd > 0 ? dst.size(nd - 1) : 1;
      if (nd >= 2 && inner >= 8 && dst.stride(nd - 1) == 1 && src_strides[static_cast<size_t>(nd - 1)] == 1) {
        // Rows that are contiguous on both sides (a narrowed or transposed view whose last dim is
        // dense: attention's q, k, v): a run per row, rows in parallel, instead of an element at a
        // time through the index counter.
        const Shape outer(dst.sizes().begin(), dst.sizes().end() - 1);
        const Shape od_strides(dst.strides().begin(), dst.strides().end() - 1);
        const Shape os_strides(src_strides.begin(), src_strides.end() - 1);
        std::vector<int64_t> rows_d, rows_s;
        rows_d.reserve(static_cast<size_t>(n / inner));
        rows_s.reserve(static_cast<size_t>(n / inner));
        for_each_offset2(outer, od_strides, os_strides, [&](int64_t od, int64_t os) {
          rows_d.push_back(od);
          rows_s.push_back(os);
        });
        const int64_t rows = static_cast<int64_t>(rows_d.size());
        parallel_for(0, rows, grain_for(inner), [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r)
            convert_run(d + rows_d[static_cast<size_t>(r)], s + rows_s[static_cast<size_t>(r)], inner);
        });
        return;
      }
      // A transpose: dst is dense along its last dim and src along another dim p (a channels-last
      // tensor made row-major, x.t().contiguous()). Each [P, I] plane of those two dims is copied
      // in 16 x 16 blocks, which keep both sides' cache lines in use, planes and blocks in parallel.
      int64_t p = -1;
      for (int64_t k = nd - 2; k >= 0 && inner > 1; --k)
        if (src_strides[static_cast<size_t>(k)] == 1 && dst.size(k) > 1) {
          p = k;
          break;
        }
      if (p >= 0 && dst.stride(nd - 1) == 1) {
        Shape outer, od_strides, os_strides;
        for (int64_t k = 0; k < nd - 1; ++k)
          if (k != p) {
            outer.push_back(dst.size(k));
            od_strides.push_back(dst.stride(k));
            os_strides.push_back(src_strides[static_cast<size_t>(k)]);
          }
        std::vector<int64_t> planes_d, planes_s;
        for_each_offset2(outer, od_strides, os_strides, [&](int64_t od, int64_t os) {
          planes_d.push_back(od);
          planes_s.push_back(os);
        });
        constexpr int64_t kBlock = 16;
        const int64_t P = dst.size(p), dp = dst.stride(p), si = src_strides[static_cast<size_t>(nd - 1)];
        const int64_t pb = (P + kBlock - 1) / kBlock, ib = (inner + kBlock - 1) / kBlock;
        const int64_t tasks = static_cast<int64_t>(planes_d.size()) * pb * ib;
        parallel_for(0, tasks, grain_for(kBlock * kBlock), [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const size_t plane = static_cast<size_t>(t / (pb * ib));
            const int64_t a0 = (t / ib) % pb * kBlock, b0 = t % ib * kBlock;
            const int64_t a1 = std::min(P, a0 + kBlock), b1 = std::min(inner, b0 + kBlock);
            D* dd = d + planes_d[plane];
            const S* ss = s + planes_s[plane];
            for (int64_t a = a0; a < a1; ++a)
              for (int64_t b = b0; b < b1; ++b) dd[a * dp + b] = cast_value<D>(ss[a + b * si]);
          }
        });
        return;
      }
      for_each_offset2(dst.sizes(), dst.strides(), src_strides,
                       [&](int64_t od, int64_t os) { d[od] = cast_value<D>(s[os]); });
    });
  });
}

Tensor contiguous_cpu(const Tensor& t, DType dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  Tensor out = new_tensor(t.sizes(), dtype, t.device());
  strided_copy(out, t, t.strides());
  return out;
}

namespace {
void cpu_device_copy(const Tensor& dst, const Tensor& src) { strided_copy(dst, src, broadcast_strides(src, dst.sizes())); }
DeviceCopyFn g_device_copy[kNumDeviceTypes] = {&cpu_device_copy, nullptr};
}  // namespace

void set_device_copy(DeviceType type, DeviceCopyFn fn) { g_device_copy[static_cast<int>(type)] = fn; }

void device_copy(const Tensor& dst, const Tensor& src) {
  GRAFT_CHECK(dst.device() == src.device(), "copy: internal error: device_copy from ", src.device(), " to ",
              dst.device());
  DeviceCopyFn fn = g_device_copy[static_cast<int>(dst.device().type)];
  GRAFT_CHECK(fn != nullptr, "copy: no kernel for ", dst.device(), " (is the backend built and loaded?)");
  if (dst.numel() > 0) fn(dst, src);
}

Tensor contiguous_as(const Tensor& t, DType dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  Tensor out = new_tensor(t.sizes(), dtype, t.device());
  device_copy(out, t);
  return out;
}

Tensor contiguous_in_format(const Tensor& t, MemoryFormat f) {
  if (t.is_contiguous(f)) return t;
  Tensor out = new_tensor_in_format(t, f);
  device_copy(out, t);
  return out;
}

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor copy_cpu(const Tensor& self, const Tensor& src, bool non_blocking) {
  (void)non_blocking;
  check_defined(self, "copy_", "self");
  check_defined(src, "copy_", "src");
  GRAFT_CHECK(self.is_cpu() && src.is_cpu(), "copy_: copying between ", self.device(), " and ", src.device(),
              " needs the CUDA backend");
  Shape b = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  GRAFT_CHECK(b == self.sizes(), "copy_: source of shape ", shape_str(src.sizes()),
              " cannot be broadcast to the destination's shape ", shape_str(self.sizes()));
  if (self.numel() == 0) return self;
  check_no_internal_overlap(self, "copy_");
  Tensor s = src;
  Shape st = broadcast_strides(src, self.sizes());
  // Overlapping src/dst (e.g. x.copy_(x.t())) would read already-written elements: copy src first.
  if (s.is_alias_of(self) && !(st == self.strides() && s.storage_offset() == self.storage_offset())) {
    Tensor tmp = new_tensor(s.sizes(), s.dtype(), s.device());
    strided_copy(tmp, s, s.strides());
    s = tmp;
    st = broadcast_strides(s, self.sizes());
  }
  strided_copy(self, s, st);
  return self;
}

Tensor fill_cpu(const Tensor& self, Scalar value) {
  check_defined(self, "fill_", "self");
  check_no_internal_overlap(self, "fill_");
  dispatch_all_dtypes(self.dtype(), "fill_", [&]<class T>() {
    T v = value.to<T>();
    T* d = static_cast<T*>(self.data_ptr());
    if (self.is_contiguous()) {
      int64_t n = self.numel();
      parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = v;
      });
    } else {
      for_each_offset(self.sizes(), self.strides(), [&](int64_t o) { d[o] = v; });
    }
  });
  return self;
}

Tensor clone_cpu(const Tensor& self, MemoryFormat memory_format) {
  check_defined(self, "clone", "self");
  Tensor out = new_tensor_in_format(self, memory_format);
  strided_copy(out, self, self.strides());
  return out;
}

Tensor to_copy_cpu(const Tensor& self, DType dtype, Device device, bool non_blocking, bool pinned) {
  (void)non_blocking;
  check_defined(self, "to", "self");
  GRAFT_CHECK(self.is_cpu() && device.is_cpu(), "to: copying ", describe(self), " to ", device,
              " needs the CUDA backend");
  // PyTorch's memory_format=preserve: a dense permuted input (channels-last) keeps its layout, so
  // an autocast cast of an NHWC activation stays NHWC and the next op runs without a reorder.
  Tensor out = pinned ? new_tensor(self.sizes(), dtype, device, pinned)
                      : new_tensor_in_format(self, MemoryFormat::Preserve, dtype, device);
  strided_copy(out, self, self.strides());
  return out;
}

namespace {

// tril (lower) or triu: each row is one copy of the kept columns and one fill of zero bytes (zero
// is all-zero bits in every dtype), so no dtype dispatch is needed.
Tensor triangle_cpu(const Tensor& self, int64_t diagonal, bool lower, const char* op) {
  const TrianglePlan p = plan_triangle(self, diagonal, op);
  Tensor out = new_tensor(self.sizes(), self.dtype(), self.device());
  if (out.numel() == 0) return out;
  Tensor src = contiguous_cpu(self);
  const auto* s = static_cast<const char*>(src.data_ptr());
  auto* d = static_cast<char*>(out.data_ptr());
  const int64_t es = static_cast<int64_t>(self.element_size()), cols = p.cols, row_bytes = cols * es;
  auto one_row = [&](int64_t r) {
    const int64_t i = r % p.rows;
    const int64_t begin = lower ? 0 : clamp_col(i + p.diagonal, cols);
    const int64_t end = lower ? clamp_col(i + p.diagonal + 1, cols) : cols;
    char* dr = d + r * row_bytes;
    std::memset(dr, 0, static_cast<size_t>(row_bytes));
    if (end > begin)
      std::memcpy(dr + begin * es, s + r * row_bytes + begin * es, static_cast<size_t>((end - begin) * es));
  };
  parallel_for(0, p.batch * p.rows, grain_for(cols),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) one_row(r);
               });
  return out;
}

}  // namespace

Tensor tril_cpu(const Tensor& self, int64_t diagonal) { return triangle_cpu(self, diagonal, true, "tril"); }
Tensor triu_cpu(const Tensor& self, int64_t diagonal) { return triangle_cpu(self, diagonal, false, "triu"); }

}  // namespace kernels

namespace ops {

Tensor& zero_(Tensor& self) { return fill_(self, 0); }

Tensor to_dtype(const Tensor& self, DType dtype) {
  if (self.dtype() == dtype) return self;
  return _to_copy(self, dtype, self.device());
}

// The kernel is chosen by the source tensor's device; the CUDA backend's _to_copy handles every
// transfer that involves a GPU. A CPU source going to CUDA is routed there by the Device argument.
Tensor to_device(const Tensor& self, Device device, bool non_blocking, bool pinned) {
  if (self.device() == device && (!pinned || self.is_pinned())) return self;
  if (self.is_cpu() && device.is_cuda()) {
    Tensor out = kernels::new_tensor(self.sizes(), self.dtype(), device);
    return copy_(out, self, non_blocking);
  }
  return _to_copy(self, self.dtype(), device, non_blocking, pinned && device.is_cpu());
}

Tensor contiguous(const Tensor& self) { return self.is_contiguous() ? self : clone(self); }
Tensor contiguous(const Tensor& self, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) return self;
  return self.is_contiguous(f) ? self : clone(self, f);
}

}  // namespace ops
}  // namespace graft
