#pragma once
// Allocator: the small virtual interface every device's memory goes through.
//
// Invariants:
// - Every byte a Storage owns came from exactly one Allocator and goes back to it through the
//   DataPtr's deleter, so statistics stay exact even when the Storage outlives the code that made it.
// - `allocated_bytes` counts bytes handed out and not yet returned: exactly the bytes of live
//   storages. Views share their base's storage, so they allocate nothing.
// - Statistics are updated under the allocator's own lock/atomics: allocators are thread-safe.
// A new device (or a fake device in tests) plugs in by implementing this interface and calling
// set_allocator().
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/device.h"

namespace graft {

struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes in live tensors' storages
  int64_t peak_allocated_bytes = 0;  // max of allocated_bytes since the last reset
  int64_t reserved_bytes = 0;        // bytes held from the system (>= allocated for caching allocators)
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_ooms = 0;           // cuda: allocations that failed even after freeing the cache
  int64_t num_alloc_retries = 0;  // cuda: allocations that succeeded after freeing the cache
  int64_t num_segments = 0;       // cuda: device allocations currently held
};

// Owning pointer to allocated bytes; the deleter returns them to their allocator.
using DataDeleter = void (*)(void* ctx, void* ptr);
struct DataPtr {
  void* ptr = nullptr;
  void* ctx = nullptr;  // passed to the deleter (usually the allocator or a block record)
  DataDeleter deleter = nullptr;
  Device device;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  // Returns cached-but-unused memory to the system; a no-op for non-caching allocators.
  virtual void empty_cache() {}
  // Device-addressed forms. An allocator serving several devices of one type (CUDA: one pool per
  // GPU) overrides them, so a tensor made for cuda:1 lands on cuda:1 whatever the current device
  // is; single-device allocators keep these defaults.
  virtual DataPtr allocate_on(Device device, size_t nbytes) { return allocate(nbytes); }
  virtual MemoryStats stats_on(Device device) const { return stats(); }
  virtual void reset_peak_stats_on(Device device) { reset_peak_stats(); }
};

// The allocator used for new storages on `device` (the CPU one is always present).
Allocator* get_allocator(Device device);
// Installs the allocator for a device type (the CUDA backend calls this at load; tests may too).
// Returns the previous one. The caller keeps ownership.
Allocator* set_allocator(DeviceType type, Allocator* alloc);

// Host memory meant for fast device copies. The CUDA backend installs a pinned allocator; without
// it, "pinned" memory is an ordinary CPU allocation; the Storage records that it was asked for
// pinned memory, so is_pinned() still answers true.
Allocator* get_pinned_host_allocator();
Allocator* set_pinned_host_allocator(Allocator* alloc);

MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
void empty_cache(Device device);

// The CPU allocator: 64-byte aligned (the widest AVX-512 load), statistics with atomics. Blocks of
// 2 MiB and more are huge-page aligned, and up to 256 MiB of freed ones are kept for reuse by
// exact size; blocks up to 1 KiB are kept in per-thread lists by 64-byte class (128 per class).
// reserved_bytes counts both; empty_cache() returns the big ones and the calling thread's small
// ones. Under AddressSanitizer nothing is kept, so a use after free still reaches the sanitizer.
Allocator* cpu_allocator();

}  // namespace graft
