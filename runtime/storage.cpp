#include "runtime/storage.h"

namespace graft {

Storage::Storage(size_t nbytes, Allocator* alloc, bool pinned)
    : ptr_(alloc->allocate(nbytes)), nbytes_(nbytes), pinned_(pinned) {}

Storage::Storage(DataPtr ptr, size_t nbytes, bool pinned) : ptr_(ptr), nbytes_(nbytes), pinned_(pinned) {}

Storage::~Storage() {
  if (ptr_.deleter) ptr_.deleter(ptr_.ctx, ptr_.ptr);
}

}  // namespace graft
