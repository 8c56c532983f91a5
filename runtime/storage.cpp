#include "runtime/storage.h"

namespace graft {

namespace {
thread_local bool t_inference_mode = false;
}

bool is_inference_mode_enabled() { return t_inference_mode; }
void set_inference_mode_enabled(bool enabled) { t_inference_mode = enabled; }

Storage::Storage(size_t nbytes, Allocator* alloc, bool pinned)
    : ptr_(alloc->allocate(nbytes)), nbytes_(nbytes), pinned_(pinned), inference_(t_inference_mode) {}

Storage::Storage(DataPtr ptr, size_t nbytes, bool pinned)
    : ptr_(ptr), nbytes_(nbytes), pinned_(pinned), inference_(t_inference_mode) {}

Storage::~Storage() {
  if (ptr_.deleter) ptr_.deleter(ptr_.ctx, ptr_.ptr);
}

}  // namespace graft
