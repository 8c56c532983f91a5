#include "runtime/storage.h"

#include "runtime/memory_log.h"

namespace graft {

namespace {
thread_local bool t_inference_mode = false;
}

bool is_inference_mode_enabled() { return t_inference_mode; }
void set_inference_mode_enabled(bool enabled) { t_inference_mode = enabled; }

Storage::Storage(size_t nbytes, Allocator* alloc, bool pinned)
    : ptr_(alloc->allocate(nbytes)), nbytes_(nbytes), pinned_(pinned), inference_(t_inference_mode) {
  if (detail::g_memory_log_on.load(std::memory_order_relaxed)) [[unlikely]]
    detail::memory_log_record(ptr_.device, static_cast<int64_t>(nbytes_));
}

Storage::Storage(DataPtr ptr, size_t nbytes, bool pinned)
    : ptr_(ptr), nbytes_(nbytes), pinned_(pinned), inference_(t_inference_mode) {
  if (detail::g_memory_log_on.load(std::memory_order_relaxed)) [[unlikely]]
    detail::memory_log_record(ptr_.device, static_cast<int64_t>(nbytes_));
}

Storage::~Storage() {
  if (detail::g_memory_log_on.load(std::memory_order_relaxed)) [[unlikely]]
    detail::memory_log_record(ptr_.device, -static_cast<int64_t>(nbytes_));
  if (ptr_.deleter) ptr_.deleter(ptr_.ctx, ptr_.ptr);
}

}  // namespace graft
