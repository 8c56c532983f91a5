// The real device behind the caching allocator (cudaMalloc, cudaFree, events), its installation for
// DeviceType::CUDA at load, record_stream for tensors, and the cached pinned host allocator.
#include "cuda/cuda_allocator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_context.h"
#include "runtime/allocator.h"
#include "runtime/error.h"

namespace graft::cuda {
namespace {

// Turns a failed CUDA call into a graft::Error after clearing the runtime's last error, so the
// next op does not report a stale failure.
[[noreturn]] void fail(cudaError_t e, const char* what, int device) {
  cudaGetLastError();
  GRAFT_ERROR("CUDA error: ", cudaGetErrorString(e), " (", what, " on cuda:", device, ")");
}

class CudaMemoryApi final : public DeviceMemoryApi {
 public:
  explicit CudaMemoryApi(int device) : device_(device) {}

  bool malloc(void** ptr, size_t nbytes) override {
    DeviceGuard g(device_);
    cudaError_t e = cudaMalloc(ptr, nbytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return false;
    }
    if (e != cudaSuccess) fail(e, "cudaMalloc", device_);
    return true;
  }

  void free(void* ptr) override {
    DeviceGuard g(device_);
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) fail(e, "cudaFree", device_);
  }

  void mem_get_info(size_t* free_bytes, size_t* total_bytes) override {
    DeviceGuard g(device_);
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) fail(e, "cudaMemGetInfo", device_);
  }

  StreamId current_stream() override { return reinterpret_cast<StreamId>(cuda::current_stream(device_)); }

  EventId record_event(StreamId stream) noexcept override {
    try {
      DeviceGuard g(device_);
      cudaEvent_t ev = nullptr;
      if (!spare_events_.empty()) {
        ev = spare_events_.back();
        spare_events_.pop_back();
      } else if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        return 0;
      }
      if (cudaEventRecord(ev, reinterpret_cast<cudaStream_t>(stream)) != cudaSuccess) {
        cudaGetLastError();
        spare_events_.push_back(ev);
        return 0;
      }
      return reinterpret_cast<EventId>(ev);
    } catch (...) {
      return 0;
    }
  }

  bool event_done(EventId event) override {
    cudaError_t e = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is an answer, not an error
      return false;
    }
    fail(e, "cudaEventQuery", device_);
  }

  void synchronize_event(EventId event) override {
    cudaError_t e = cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(event));
    if (e != cudaSuccess) fail(e, "cudaEventSynchronize", device_);
  }

  // Events are recycled: creating one costs more than recording it, and a stream-heavy program
  // frees blocks used on other streams all the time.
  void release_event(EventId event) override {
    try {
      spare_events_.push_back(reinterpret_cast<cudaEvent_t>(event));
    } catch (...) {
      cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event));
    }
  }

 private:
  int device_;
  std::vector<cudaEvent_t> spare_events_;  // guarded by the caching allocator's mutex
};

struct DeviceAllocators {
  std::vector<CudaMemoryApi*> apis;
  std::vector<CachingAllocator*> allocators;
};
// Set once while libgraft loads (before main, so before any other thread), read-only afterwards.
DeviceAllocators* g_devices = nullptr;

// What get_allocator(kCUDA) returns: forwards to the current device's caching allocator.
class CurrentDeviceAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override { return device_allocator(current_device()).allocate(nbytes); }
  MemoryStats stats() const override { return device_allocator(current_device()).stats(); }
  void reset_peak_stats() override { device_allocator(current_device()).reset_peak_stats(); }
  DataPtr allocate_on(Device device, size_t nbytes) override {
    return device_allocator(device.index).allocate(nbytes);
  }
  MemoryStats stats_on(Device device) const override { return device_allocator(device.index).stats(); }
  void reset_peak_stats_on(Device device) override { device_allocator(device.index).reset_peak_stats(); }
  void empty_cache() override {
    for (CachingAllocator* a : g_devices->allocators) a->empty_cache();
  }
};

// Page-locked host memory for asynchronous copies, cached because cudaHostAlloc and cudaFreeHost
// are slow and synchronise the device.
// - Sizes go to classes: the next power of two up to 16 MiB (at most 2x waste, and few classes so
//   freed blocks are found again), multiples of 16 MiB above. A freed block is reused only for a
//   request of the same class.
// - At free, an event is recorded on the current stream of the current device: a non_blocking copy
//   from or to the block may still be queued there, so the block becomes reusable only once that
//   event has completed.
// - OOM: wait for pending events, free every cached block, retry once, then throw.
class PinnedHostAllocator final : public Allocator {
 public:
  static constexpr size_t kMinClass = 512;
  static constexpr size_t kPow2Limit = 16 << 20;

  static size_t size_class(size_t nbytes) {
    if (nbytes > kPow2Limit) {
      GRAFT_CHECK(nbytes <= SIZE_MAX - kPow2Limit, "pinned host allocator: cannot allocate ", nbytes, " bytes");
      return (nbytes + kPow2Limit - 1) / kPow2Limit * kPow2Limit;
    }
    size_t c = kMinClass;
    while (c < nbytes) c <<= 1;
    return c;
  }

  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) {
      std::lock_guard<std::mutex> g(mu_);
      stats_.num_allocs++;
      return DataPtr{nullptr, this, &PinnedHostAllocator::release_empty, kCPU};
    }
    size_t cls = size_class(nbytes);
    std::lock_guard<std::mutex> g(mu_);
    process_pending(/*wait=*/false);
    void* p = take_cached(cls);
    if (!p) {
      p = host_alloc(cls);
      if (!p) {
        process_pending(/*wait=*/true);
        p = take_cached(cls);
        if (!p) {
          release_cached();
          p = host_alloc(cls);
        }
        if (!p) {
          stats_.num_ooms++;
          GRAFT_ERROR("pinned host allocator: out of memory allocating ", nbytes, " bytes (", cls,
                      " with rounding); ", stats_.allocated_bytes, " bytes allocated, ", stats_.reserved_bytes,
                      " bytes reserved");
        }
        stats_.num_alloc_retries++;
      }
    }
    live_.emplace(p, cls);
    stats_.allocated_bytes += static_cast<int64_t>(cls);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    stats_.num_allocs++;
    return DataPtr{p, this, &PinnedHostAllocator::release, kCPU};
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> g(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> g(mu_);
    process_pending(/*wait=*/true);
    release_cached();
  }

 private:
  struct Pending {
    cudaEvent_t event;
    void* ptr;
    size_t cls;
  };

  // nullptr when out of memory; other failures throw.
  void* host_alloc(size_t n) {
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      GRAFT_ERROR("CUDA error: ", cudaGetErrorString(e), " (cudaHostAlloc of ", n, " bytes)");
    }
    stats_.reserved_bytes += static_cast<int64_t>(n);
    stats_.num_segments++;
    return p;
  }

  void* take_cached(size_t cls) {
    auto it = cached_.find(cls);
    if (it == cached_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    return p;
  }

  void process_pending(bool wait) {
    size_t keep = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending q = pending_[i];
      cudaError_t e = wait ? cudaEventSynchronize(q.event) : cudaEventQuery(q.event);
      if (e == cudaErrorNotReady) {
        cudaGetLastError();
        pending_[keep++] = q;
        continue;
      }
      // Done, or the event is broken (the context is gone): either way nothing more will wait.
      if (e != cudaSuccess) cudaGetLastError();
      cudaEventDestroy(q.event);
      cached_[q.cls].push_back(q.ptr);
    }
    pending_.resize(keep);
  }

  void release_cached() {
    for (auto& [cls, list] : cached_) {
      for (void* p : list) {
        cudaFreeHost(p);
        stats_.reserved_bytes -= static_cast<int64_t>(cls);
        stats_.num_segments--;
      }
      list.clear();
    }
    cudaGetLastError();
  }

  static void release_empty(void* ctx, void*) {
    auto* self = static_cast<PinnedHostAllocator*>(ctx);
    std::lock_guard<std::mutex> g(self->mu_);
    self->stats_.num_frees++;
  }

  static void release(void* ctx, void* ptr) {
    auto* self = static_cast<PinnedHostAllocator*>(ctx);
    std::lock_guard<std::mutex> g(self->mu_);
    auto it = self->live_.find(ptr);
    if (it == self->live_.end()) return;  // not ours: nothing sensible to do in a deleter
    size_t cls = it->second;
    self->live_.erase(it);
    self->stats_.allocated_bytes -= static_cast<int64_t>(cls);
    self->stats_.num_frees++;
    cudaEvent_t ev = nullptr;
    try {
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess &&
          cudaEventRecord(ev, current_stream()) == cudaSuccess) {
        self->pending_.push_back(Pending{ev, ptr, cls});
        return;
      }
    } catch (...) {
    }
    // No event could be recorded (no current device, or CUDA is shutting down): no copy can be
    // queued that we could wait for, so the block is reusable now.
    cudaGetLastError();
    if (ev) cudaEventDestroy(ev);
    try {
      self->cached_[cls].push_back(ptr);
    } catch (...) {
    }
  }

  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> live_;      // allocated block -> its class
  std::map<size_t, std::vector<void*>> cached_;  // class -> reusable blocks
  std::vector<Pending> pending_;                // freed, waiting for their event
  MemoryStats stats_;
};

// Installs the allocators when libgraft loads, only where a CUDA device exists, so a machine
// without one keeps "no allocator for device cuda:0" errors and sees no CUDA noise. Asks the runtime
// directly: the backend hooks are registered by another file's static initialiser, whose order
// relative to this one is unspecified.
struct Registrar {
  Registrar() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (n <= 0) return;
    auto* devices = new DeviceAllocators();  // leaked: see cuda_allocator.h
    for (int d = 0; d < n; ++d) {
      devices->apis.push_back(new CudaMemoryApi(d));
      devices->allocators.push_back(new CachingAllocator(devices->apis.back(), d));
    }
    g_devices = devices;
    set_allocator(DeviceType::CUDA, new CurrentDeviceAllocator());
    set_pinned_host_allocator(new PinnedHostAllocator());
  }
} g_registrar;

}  // namespace

CachingAllocator& device_allocator(int device) {
  GRAFT_CHECK(g_devices != nullptr, "CUDA caching allocator: no CUDA device is available");
  GRAFT_CHECK(device >= 0 && static_cast<size_t>(device) < g_devices->allocators.size(),
              "CUDA caching allocator: no device cuda:", device, " (", g_devices->allocators.size(),
              " CUDA devices found)");
  return *g_devices->allocators[static_cast<size_t>(device)];
}

CachingAllocatorStats allocator_stats(int device) { return device_allocator(device).detailed_stats(); }

void record_stream(const Tensor& t, cudaStream_t stream) {
  GRAFT_CHECK(t.defined(), "record_stream: the tensor is undefined");
  GRAFT_CHECK(t.device().is_cuda(), "record_stream: expected a CUDA tensor, but it is on ", t.device());
  const auto& storage = t.impl()->storage();
  device_allocator(t.device().index).record_stream(storage->data(), reinterpret_cast<StreamId>(stream));
}

}  // namespace graft::cuda
