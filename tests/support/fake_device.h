#pragma once
// A fake "cuda" device for tests on machines without a GPU: its allocator hands out host memory
// and counts bytes, so tests can create tensors that report device cuda:0 and exercise the
// dispatcher's device checks. Kernels for it exist only where a test registers them.
#include <cstdlib>

#include "graft.h"

namespace graft::testing {

class FakeDeviceAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    void* p = std::malloc(nbytes ? nbytes : 1);
    stats_.allocated_bytes += static_cast<int64_t>(nbytes);
    stats_.num_allocs++;
    sizes_bytes_ += nbytes;
    return DataPtr{p, this, &FakeDeviceAllocator::release, Device(DeviceType::CUDA, 0)};
  }
  MemoryStats stats() const override { return stats_; }
  void reset_peak_stats() override {}

 private:
  static void release(void* ctx, void* p) {
    auto* self = static_cast<FakeDeviceAllocator*>(ctx);
    self->stats_.num_frees++;
    std::free(p);
  }
  MemoryStats stats_;
  size_t sizes_bytes_ = 0;
};

// Installs the fake allocator for DeviceType::CUDA for the guard's lifetime.
class FakeCudaGuard {
 public:
  FakeCudaGuard() { prev_ = set_allocator(DeviceType::CUDA, &alloc_); }
  ~FakeCudaGuard() { set_allocator(DeviceType::CUDA, prev_); }
  FakeDeviceAllocator& allocator() { return alloc_; }

 private:
  FakeDeviceAllocator alloc_;
  Allocator* prev_ = nullptr;
};

}  // namespace graft::testing
