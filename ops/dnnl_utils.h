#pragma once
// Shared plumbing for the oneDNN-backed CPU kernels (matmul, convolution).
//
// Invariants:
// - One process-wide CPU engine, created on first use (a function-local static, so the first
//   call is thread-safe). oneDNN engines are immutable and safe to share between threads.
// - One stream per calling thread (thread_local): a dnnl::stream is not documented as safe for
//   concurrent submission, and concurrent backward passes run on different threads. With the
//   OpenMP runtime execution is synchronous, so a stream never holds work after execute returns.
// - Every cached primitive is created with scratchpad_mode::user. Its scratchpad comes from a
//   thread_local buffer at execute time, so one primitive object can run on several threads at
//   once without sharing scratch memory, and no call allocates scratch after warm-up.
// - Cached entries are immutable after creation and handed out as shared_ptr<const ...>: an
//   entry evicted while another thread is executing it stays alive until that call returns.
// - A key names everything that changes the primitive: kind, dtypes, dims, strides, attributes
//   and the number of threads (oneDNN fixes its work split when the primitive is created).
// - bfloat16 primitives are used only where they run on bf16 hardware: bf16_matmul_impl() probes
//   once. Elsewhere the kernels convert to float32, run the float32 primitive and round once
//   (the same result up to the order of float sums): under ONEDNN_MAX_CPU_ISA=AVX2 oneDNN 2.6 has
//   no bf16 primitive at all, and under AVX512_CORE it emulates bf16 (gemm:jit, jit_bf16:
//   avx512_core) at 0.3-0.4x the float path's speed (1024^3 matmul, one thread: 69 against 175
//   GFLOP/s). float16 always takes the float path on the CPU: oneDNN 2.6 has no f16 matmul or
//   convolution for it to use.
// - A real bf16 kernel is used only where it beats the float path: on AMX tiles, and on AVX512_BF16
//   dot products of CPUs other than Intel's (AMD Zen 4: 463 against 203 GFLOP/s, 1024^3 matmul,
//   one thread). On an Intel CPU without AMX (Cooper Lake, or a Sapphire/Emerald Rapids whose VM
//   hides the tiles), VDPBF16PS issues on one port where float FMAs issue on two, so its peak is
//   the float peak, and oneDNN 2.6's bf16 kernels measured 0.6-0.7x its float ones (Emerald
//   Rapids, 2 threads: 1024^3 matmul 152 against 243 GFLOP/s, the CNN's 3x3 convolution's forward,
//   data and weight gradients 2.6-3.4 ms against 1.6-2.3 ms). Rounding to float32 copies costs a
//   few percent of that. GRAFT_BF16_PRIMITIVES=on|off|auto (read once) overrides the choice, so
//   tests can run both paths on one machine.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "runtime/tensor.h"

namespace graft::dnnl_utils {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();  // this thread's stream

dnnl::memory::data_type to_dnnl(DType t);  // float32, bfloat16; throws for the rest

// The implementation oneDNN picks for a small bfloat16 matmul ("brg:avx512_core_bf16",
// "gemm:jit", ...), or "" when it cannot create one (ONEDNN_MAX_CPU_ISA below AVX512_CORE).
// Probed once, at the first call (oneDNN reads its ISA cap once too).
const std::string& bf16_matmul_impl();
// Whether the kernels use oneDNN's bf16 primitives: choose_bf16_primitives on the probe, this CPU's
// vendor and GRAFT_BF16_PRIMITIVES, decided once.
bool use_bf16_primitives();
// The rule behind use_bf16_primitives, pure so that it can be tested for every CPU: `impl` is
// bf16_matmul_impl()'s answer, `setting` GRAFT_BF16_PRIMITIVES ("" or "auto", "on", "off"). "on"
// still needs a kernel for bf16 hardware (an emulation or no kernel never pays). Throws
// graft::Error naming the accepted values for any other setting.
bool choose_bf16_primitives(const std::string& impl, bool intel_cpu, const std::string& setting);
// Whether those bf16 primitives run on AMX tiles (Sapphire Rapids and later).
bool amx_bf16();

// A plain (non-blocked) descriptor with explicit sizes and strides (in elements).
dnnl::memory::desc make_desc(const Shape& sizes, const Shape& strides, DType dtype);
// The descriptor of a tensor as it lies in memory (its sizes and strides, no copy).
dnnl::memory::desc make_desc(const Tensor& t);
// A memory object over `data` (not owned). `data` may be const: oneDNN only writes outputs.
dnnl::memory make_memory(const dnnl::memory::desc& md, const void* data);

// ---- primitive cache ----

// Up to kMaxKeyWords integers; longer keys are marked uncacheable (the caller then builds a
// fresh primitive every call, which is correct, only slower).
class PrimitiveKey {
 public:
  static constexpr int kMaxKeyWords = 112;
  explicit PrimitiveKey(int64_t kind) { add(kind); }
  PrimitiveKey& add(int64_t v) {
    if (n_ < kMaxKeyWords)
      w_[n_++] = v;
    else
      overflow_ = true;
    return *this;
  }
  PrimitiveKey& add(const Shape& s) {
    add(static_cast<int64_t>(s.size()));
    for (int64_t v : s) add(v);
    return *this;
  }
  bool cacheable() const { return !overflow_; }
  size_t hash() const;
  bool operator==(const PrimitiveKey& o) const;

 private:
  int64_t w_[kMaxKeyWords];
  int n_ = 0;
  bool overflow_ = false;
};

struct PrimitiveKeyHash {
  size_t operator()(const PrimitiveKey& k) const { return k.hash(); }
};

// What the cache stores. Kernels derive from it to keep extra state (descriptors, reorders)
// next to the primitive.
struct CachedPrimitive {
  virtual ~CachedPrimitive() = default;
  dnnl::primitive prim;
  dnnl::memory::desc scratchpad;  // from the primitive descriptor (user scratchpad mode)
};

// Returns the cached entry for `key`, or calls `make` (outside the lock) and caches its result.
// `make` may throw (e.g. dnnl::error for an unsupported layout); nothing is cached then.
std::shared_ptr<const CachedPrimitive> get_or_create(const PrimitiveKey& key,
                                                     const std::function<std::shared_ptr<CachedPrimitive>()>& make);
template <class P>
std::shared_ptr<const P> get_or_create_as(const PrimitiveKey& key, const std::function<std::shared_ptr<P>()>& make) {
  return std::static_pointer_cast<const P>(get_or_create(key, [&]() -> std::shared_ptr<CachedPrimitive> { return make(); }));
}
size_t primitive_cache_size();
void clear_primitive_cache();

// An attr with user-managed scratchpad: every primitive this library caches is built with one.
dnnl::primitive_attr default_attr();

// Runs `prim` on this thread's stream, adding the thread_local scratchpad when it needs one.
// `args` is taken by value so the scratchpad can be added without the caller's map growing.
void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> args);
inline void execute(const CachedPrimitive& p, std::unordered_map<int, dnnl::memory> args) {
  execute(p.prim, p.scratchpad, std::move(args));
}

// Temporary buffer (64-byte aligned) for reordered operands; reused per thread, so two live
// buffers need two slots. Valid until the next call with the same slot on this thread.
void* thread_buffer(int slot, size_t bytes);

}  // namespace graft::dnnl_utils
