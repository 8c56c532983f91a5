#pragma once
// Storage: refcounted bytes on one device, plus the version counter of everything that views them.
//
// Why the version counter lives here: an in-place write through any view changes bytes that every
// other view of the same storage observes. Autograd must notice that a tensor it saved was
// overwritten no matter which alias did the writing, so the counter has to be shared by exactly
// the set of tensors that share bytes. Keeping it in the Storage makes that sharing automatic and
// free: every view (and detach()) holds the same Storage, so it cannot forget to share the counter,
// and no extra allocation is made per tensor. TensorImpl::version() reads it from here.
// Every in-place kernel bumps it exactly once per op (the dispatcher does it from the op schema,
// not the kernels, so no kernel can forget or double-count).
//
// Inference storage: bytes allocated under InferenceMode belong to inference tensors, which
// autograd can never save (SavedVariable refuses them), so nothing can ever compare their
// version: they skip the counter (as c10's inference tensors have none).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/allocator.h"

namespace graft {

// The thread-local InferenceMode switch (autograd::InferenceMode sets it; see grad_mode.h).
bool is_inference_mode_enabled();
void set_inference_mode_enabled(bool enabled);

class Storage {
 public:
  // Allocates `nbytes` from `alloc` (which decides the device).
  Storage(size_t nbytes, Allocator* alloc, bool pinned = false);
  // Adopts bytes allocated elsewhere; `ptr.deleter` frees them.
  Storage(DataPtr ptr, size_t nbytes, bool pinned = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return ptr_.device; }
  bool pinned() const { return pinned_; }

  int64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() {
    if (!inference_) version_.fetch_add(1, std::memory_order_relaxed);
  }
  // Allocated under InferenceMode (see above).
  bool is_inference() const { return inference_; }

 private:
  DataPtr ptr_;
  size_t nbytes_;
  bool pinned_;
  bool inference_;
  std::atomic<int64_t> version_{0};
};

}  // namespace graft
