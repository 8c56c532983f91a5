#include "ops/dnnl_utils.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"

namespace graft::dnnl_utils {

dnnl::engine& cpu_engine() {
  // Leaked, like the cache: a kernel may still run from another static's destructor.
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dnnl::memory::data_type to_dnnl(DType t) {
  switch (t) {
    case DType::Float32: return dnnl::memory::data_type::f32;
    case DType::BFloat16: return dnnl::memory::data_type::bf16;
    default: break;
  }
  GRAFT_ERROR("oneDNN: dtype ", t, " is not supported (float32 and bfloat16 only)");
}

const std::string& bf16_matmul_impl() {
  static const std::string impl = [] {
    try {
      dnnl::memory::desc md({64, 64}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), default_attr(), cpu_engine());
      return std::string(pd.impl_info_str());
    } catch (const dnnl::error&) {
      return std::string();
    }
  }();
  return impl;
}

bool choose_bf16_primitives(const std::string& impl, bool intel_cpu, const std::string& setting) {
  if (setting != "" && setting != "auto" && setting != "on" && setting != "off")
    GRAFT_ERROR("GRAFT_BF16_PRIMITIVES='", setting, "': expected on, off or auto");
  const bool amx = impl.find("amx") != std::string::npos;
  const bool hardware = amx || impl.find("bf16") != std::string::npos;  // not gemm:jit's emulation
  if (!hardware || setting == "off") return false;
  if (setting == "on") return true;
  return amx || !intel_cpu;
}

bool use_bf16_primitives() {
  static const bool use = [] {
    const char* setting = std::getenv("GRAFT_BF16_PRIMITIVES");
    return choose_bf16_primitives(bf16_matmul_impl(), cpu_is_intel(), setting ? setting : "");
  }();
  return use;
}

bool amx_bf16() {
  static const bool amx = bf16_matmul_impl().find("amx") != std::string::npos;
  return amx;
}

dnnl::memory::desc make_desc(const Shape& sizes, const Shape& strides, DType dtype) {
  return dnnl::memory::desc(dnnl::memory::dims(sizes.begin(), sizes.end()), to_dnnl(dtype),
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc make_desc(const Tensor& t) { return make_desc(t.sizes(), t.strides(), t.dtype()); }

dnnl::memory make_memory(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, cpu_engine(), const_cast<void*>(data));
}

// ---- cache ----

size_t PrimitiveKey::hash() const {
  // FNV-1a over the words: keys are short, and equal shapes must collide only by equality.
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n_; ++i) {
    h ^= static_cast<uint64_t>(w_[i]);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

bool PrimitiveKey::operator==(const PrimitiveKey& o) const {
  return n_ == o.n_ && overflow_ == o.overflow_ && std::memcmp(w_, o.w_, sizeof(int64_t) * n_) == 0;
}

namespace {

// A small LRU: a training loop cycles through a few dozen shapes, so 512 entries keep them all
// while a program that sweeps shapes cannot grow memory without bound.
constexpr size_t kCacheCapacity = 512;

struct Cache {
  using Entry = std::pair<PrimitiveKey, std::shared_ptr<const CachedPrimitive>>;
  std::mutex mu;
  std::list<Entry> lru;  // front = most recently used
  std::unordered_map<PrimitiveKey, std::list<Entry>::iterator, PrimitiveKeyHash> index;
};

Cache& cache() {
  static Cache* c = new Cache();  // leaked: kernels may run during static destruction
  return *c;
}

}  // namespace

std::shared_ptr<const CachedPrimitive> get_or_create(const PrimitiveKey& key,
                                                     const std::function<std::shared_ptr<CachedPrimitive>()>& make) {
  if (!key.cacheable()) return make();
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  // Built outside the lock: creation takes tens of microseconds and must not serialise other
  // threads' lookups. Two threads racing on a new key both build; the first insert wins.
  std::shared_ptr<const CachedPrimitive> made = make();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.index.find(key);
  if (it != c.index.end()) return it->second->second;
  c.lru.emplace_front(key, made);
  c.index.emplace(key, c.lru.begin());
  if (c.lru.size() > kCacheCapacity) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return made;
}

size_t primitive_cache_size() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.lru.size();
}

void clear_primitive_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.index.clear();
  c.lru.clear();
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

struct AlignedBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~AlignedBuffer() { std::free(ptr); }
  void* get(size_t n) {
    if (n > bytes) {
      std::free(ptr);
      // Grow geometrically so a slowly increasing size does not reallocate every call.
      size_t want = std::max(n, bytes + bytes / 2);
      want = (want + 63) / 64 * 64;
      ptr = std::aligned_alloc(64, want);
      GRAFT_CHECK(ptr != nullptr, "oneDNN: out of memory allocating a ", want, "-byte work buffer");
      bytes = want;
    }
    return ptr;
  }
};

constexpr int kNumSlots = 4;  // slot 0 is the scratchpad; kernels use 1..3

}  // namespace

void* thread_buffer(int slot, size_t bytes) {
  thread_local AlignedBuffer buffers[kNumSlots];
  GRAFT_CHECK(slot >= 0 && slot < kNumSlots, "oneDNN: work buffer slot ", slot, " out of range");
  return buffers[slot].get(bytes == 0 ? 64 : bytes);
}

void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> args) {
  size_t bytes = scratchpad.get_size();
  if (bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, make_memory(scratchpad, thread_buffer(0, bytes)));
  dnnl::stream& s = cpu_stream();
  try {
    prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    GRAFT_ERROR("oneDNN: executing a primitive failed: ", e.what());
  }
}

}  // namespace graft::dnnl_utils
