#include "runtime/allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/error.h"

namespace graft {

namespace {

// Statistics kept with atomics: allocation is on every op's path, a mutex would serialise threads.
struct AtomicStats {
  std::atomic<int64_t> allocated{0}, peak{0}, allocs{0}, frees{0};

  void on_alloc(int64_t n) {
    int64_t now = allocated.fetch_add(n, std::memory_order_relaxed) + n;
    allocs.fetch_add(1, std::memory_order_relaxed);
    int64_t p = peak.load(std::memory_order_relaxed);
    while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
  void on_free(int64_t n) {
    allocated.fetch_sub(n, std::memory_order_relaxed);
    frees.fetch_add(1, std::memory_order_relaxed);
  }
  MemoryStats snapshot() const {
    MemoryStats s;
    s.allocated_bytes = allocated.load(std::memory_order_relaxed);
    s.peak_allocated_bytes = peak.load(std::memory_order_relaxed);
    s.reserved_bytes = s.allocated_bytes;
    s.num_allocs = allocs.load(std::memory_order_relaxed);
    s.num_frees = frees.load(std::memory_order_relaxed);
    return s;
  }
};

// The block size is remembered in a 64-byte header in front of the user pointer, so free() knows
// how many bytes to subtract without a side table.
constexpr size_t kAlign = 64;

// Blocks of 2 MiB and more start on a huge-page boundary and ask for transparent huge pages: a
// fresh 64 MiB output then costs 32 page faults instead of 16384 (elementwise_add_gbps 6.6 -> see
// the README), which is most of the time of a large elementwise op on a new tensor.
constexpr size_t kHugePage = size_t{2} << 20;
// Freed huge-page blocks are kept for reuse, by exact (2 MiB-rounded) size, up to this many bytes:
// a training step frees and reallocates the same activation sizes every step, and a fresh block
// costs its page faults and the kernel's zeroing again (a quarter of a channels-last CNN step,
// measured with perf). Small blocks are left to malloc, which already reuses them.
// Medium blocks (kMediumMin up to 2 MiB) are cached the same way, rounded to whole 4 KiB pages:
// left to malloc, each was an mmap/munmap or a heap trim per use, and its pages faulted and zeroed
// again every step (a quarter of the bf16 CNN step's time was the kernel's page-fault path, whose
// halved activations fall below 2 MiB).
// Small blocks (header included, up to kSmallMax) are kept per thread in one free list per
// 64-byte size class: aligned_alloc's memalign path splits and coalesces chunks on every call,
// and a graph of tiny ops allocates one block per op (engine_us_per_op: a third of its time was
// malloc/free). A list holds at most kSmallPerClass blocks; a block freed on another thread joins
// that thread's lists. A thread's lists are freed when it exits; a block released after that (a
// storage outliving its thread's teardown) goes straight to free().
constexpr size_t kMediumMin = size_t{256} << 10;
constexpr size_t kPage = 4096;
constexpr size_t kSmallMax = 1024;
constexpr size_t kSmallClasses = kSmallMax / kAlign;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kHugeCacheBytes = 0;
constexpr size_t kSmallPerClass = 0;
#else
constexpr size_t kHugeCacheBytes = size_t{256} << 20;
constexpr size_t kSmallPerClass = 128;
#endif

std::atomic<int64_t> g_small_cached_bytes{0};

struct SmallCache {
  std::vector<void*> lists[kSmallClasses];
  ~SmallCache();
  void clear() {
    for (size_t c = 0; c < kSmallClasses; ++c) {
      for (void* raw : lists[c]) std::free(raw);
      g_small_cached_bytes.fetch_sub(static_cast<int64_t>(lists[c].size() * (c + 1) * kAlign), std::memory_order_relaxed);
      lists[c].clear();
    }
  }
};
// Trivially destructible, so it stays readable while the thread's other thread_locals are torn down.
thread_local bool tl_small_cache_gone = false;
thread_local SmallCache tl_small_cache;
SmallCache::~SmallCache() {
  clear();
  tl_small_cache_gone = true;
}

class HostAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    size_t total = block_bytes(nbytes);
    const bool huge = total >= kHugePage;
    void* raw = total >= kMediumMin ? take_cached(total) : take_small(total);
    if (!raw) {
      raw = std::aligned_alloc(huge ? kHugePage : kAlign, total);
#ifdef MADV_HUGEPAGE
      if (raw && huge) madvise(raw, total, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
    }
    if (!raw) {
      empty_cache();
      raw = std::aligned_alloc(huge ? kHugePage : kAlign, total);
    }
    if (!raw) GRAFT_ERROR("cpu allocator: out of memory allocating ", nbytes, " bytes");
    *static_cast<size_t*>(raw) = nbytes;
    stats_.on_alloc(static_cast<int64_t>(nbytes));
    return DataPtr{static_cast<char*>(raw) + kAlign, this, &HostAllocator::release, kCPU};
  }
  MemoryStats stats() const override {
    MemoryStats s = stats_.snapshot();
    std::lock_guard<std::mutex> lock(cache_mu_);
    s.reserved_bytes += static_cast<int64_t>(cached_bytes_) + g_small_cached_bytes.load(std::memory_order_relaxed);
    return s;
  }
  void reset_peak_stats() override { stats_.peak.store(stats_.allocated.load()); }
  // The huge-block cache, and the calling thread's small-block lists (other threads' lists are
  // theirs until they exit).
  void empty_cache() override {
    if (!tl_small_cache_gone) tl_small_cache.clear();
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (auto& [bytes, raw] : cache_) std::free(raw);
    cache_.clear();
    cached_bytes_ = 0;
  }

 private:
  // Header plus payload; blocks of 2 MiB and more round up to whole huge pages (aligned_alloc
  // wants a multiple of the alignment), medium ones to whole pages.
  static size_t block_bytes(size_t nbytes) {
    size_t total = ((nbytes + kAlign - 1) / kAlign) * kAlign + kAlign;
    if (total >= kHugePage) return (total + kHugePage - 1) / kHugePage * kHugePage;
    if (total >= kMediumMin) return (total + kPage - 1) / kPage * kPage;
    return total;
  }
  static void* take_small(size_t total) {
    if (kSmallPerClass == 0 || total > kSmallMax || tl_small_cache_gone) return nullptr;
    std::vector<void*>& list = tl_small_cache.lists[total / kAlign - 1];
    if (list.empty()) return nullptr;
    void* raw = list.back();
    list.pop_back();
    g_small_cached_bytes.fetch_sub(static_cast<int64_t>(total), std::memory_order_relaxed);
    return raw;
  }
  static bool keep_small(void* raw, size_t total) {
    if (kSmallPerClass == 0 || total > kSmallMax || tl_small_cache_gone) return false;
    std::vector<void*>& list = tl_small_cache.lists[total / kAlign - 1];
    if (list.size() >= kSmallPerClass) return false;
    if (list.capacity() == 0) list.reserve(kSmallPerClass);
    list.push_back(raw);
    g_small_cached_bytes.fetch_add(static_cast<int64_t>(total), std::memory_order_relaxed);
    return true;
  }
  void* take_cached(size_t total) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(total);
    if (it == cache_.end()) return nullptr;
    void* raw = it->second;
    cache_.erase(it);
    cached_bytes_ -= total;
    return raw;
  }
  static void release(void* ctx, void* ptr) {
    auto* self = static_cast<HostAllocator*>(ctx);
    void* raw = static_cast<char*>(ptr) - kAlign;
    size_t nbytes = *static_cast<size_t*>(raw);
    self->stats_.on_free(static_cast<int64_t>(nbytes));
    size_t total = block_bytes(nbytes);
    if (keep_small(raw, total)) return;
    if (total >= kMediumMin) {
      std::lock_guard<std::mutex> lock(self->cache_mu_);
      if (self->cached_bytes_ + total <= kHugeCacheBytes) {
        self->cache_.emplace(total, raw);
        self->cached_bytes_ += total;
        return;
      }
    }
    std::free(raw);
  }
  AtomicStats stats_;
  mutable std::mutex cache_mu_;
  std::multimap<size_t, void*> cache_;  // total bytes -> free block (medium and huge blocks)
  size_t cached_bytes_ = 0;
};

HostAllocator& cpu_instance() {
  static HostAllocator* a = new HostAllocator();  // leaked: storages may die after main()
  return *a;
}

std::atomic<Allocator*> g_allocators[kNumDeviceTypes] = {};
std::atomic<Allocator*> g_pinned{nullptr};

}  // namespace

Allocator* cpu_allocator() { return &cpu_instance(); }

Allocator* get_allocator(Device device) {
  if (device.is_cpu()) {
    Allocator* a = g_allocators[0].load(std::memory_order_acquire);
    return a ? a : cpu_allocator();
  }
  Allocator* a = g_allocators[static_cast<int>(device.type)].load(std::memory_order_acquire);
  GRAFT_CHECK(a != nullptr, "no allocator for device ", device,
              ": graft was built without CUDA support or no CUDA device is available");
  return a;
}

Allocator* set_allocator(DeviceType type, Allocator* alloc) {
  return g_allocators[static_cast<int>(type)].exchange(alloc);
}

Allocator* get_pinned_host_allocator() {
  Allocator* a = g_pinned.load(std::memory_order_acquire);
  return a ? a : cpu_allocator();
}
Allocator* set_pinned_host_allocator(Allocator* alloc) { return g_pinned.exchange(alloc); }

MemoryStats memory_stats(Device device) { return get_allocator(device)->stats_on(device); }
void reset_peak_memory_stats(Device device) { get_allocator(device)->reset_peak_stats_on(device); }
void empty_cache(Device device) { get_allocator(device)->empty_cache(); }

}  // namespace graft
