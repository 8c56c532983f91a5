#include "cuda/caching_allocator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <sstream>

#include "runtime/error.h"

namespace graft::cuda {

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  std::ostringstream os;
  if (u == 0) os << bytes << " bytes";
  else os << std::fixed << std::setprecision(2) << v << ' ' << units[u];
  return os.str();
}

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

CachingAllocator::CachingAllocator(DeviceMemoryApi* api, int device_index) : api_(api), device_index_(device_index) {
  GRAFT_CHECK(api != nullptr, "CachingAllocator: the device memory API must not be null");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> g(mu_);
  try {
    synchronize_events();  // blocks waiting only for other streams can then be returned too
  } catch (...) {
    for (auto& [ev, b] : events_) api_->release_event(ev);
    events_.clear();
  }
  for (auto& [addr, seg] : segments_) {
    Block* b = seg.head;
    // A segment still holding live or pending blocks is leaked, not freed: handing memory that
    // may still be read or written back to the device would be worse than the leak.
    bool whole = b->cached() && b->next == nullptr;
    if (whole) {
      try {
        api_->free(b->ptr);
      } catch (...) {
      }
    }
    while (b) {
      Block* n = b->next;
      delete b;
      b = n;
    }
  }
}

size_t CachingAllocator::round_size(size_t nbytes) {
  GRAFT_CHECK(nbytes <= std::numeric_limits<size_t>::max() - kLargeRounding,
              "CUDA caching allocator: cannot allocate ", nbytes, " bytes (the size overflows)");
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  return (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMidRequest) return kLargeSegment;
  return (rounded + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
}

DataPtr CachingAllocator::allocate(size_t nbytes) {
  StreamId stream;
  {
    std::lock_guard<std::mutex> g(mu_);  // the API is only ever called under the lock
    stream = api_->current_stream();
  }
  return allocate(nbytes, stream);
}

DataPtr CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  Device device(DeviceType::CUDA, device_index_);
  if (nbytes == 0) {
    // No block: an empty storage needs no memory, but it is still counted so num_allocs and
    // num_frees pair up like on every other allocator.
    std::lock_guard<std::mutex> g(mu_);
    stats_.num_allocs++;
    return DataPtr{nullptr, this, &CachingAllocator::release_empty, device};
  }
  size_t size = round_size(nbytes);
  bool small = size <= kSmallRequest;

  std::lock_guard<std::mutex> g(mu_);
  process_events();
  Pool& pool = small ? small_pool_ : large_pool_;
  Block* b = take_cached(pool, stream, size);
  if (!b) b = new_segment(nbytes, size, small, stream);
  split(b, size);
  b->allocated = true;
  b->requested = nbytes;
  active_.emplace(b->ptr, b);

  stats_.allocated_bytes += static_cast<int64_t>(b->size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.num_allocs++;
  requested_bytes_ += static_cast<int64_t>(nbytes);
  return DataPtr{b->ptr, this, &CachingAllocator::release, device};
}

CachingAllocator::Block* CachingAllocator::take_cached(Pool& pool, StreamId stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  // The smallest cached block of this stream that fits (ties: the lowest address, which keeps
  // allocations packed towards the start of segments).
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t nbytes, size_t size, bool small, StreamId stream) {
  size_t seg = segment_size(size);
  void* p = nullptr;
  if (!api_->malloc(&p, seg)) {
    // Blocks waiting for other streams may be all the request needs once those streams finish.
    synchronize_events();
    if (Block* b = take_cached(small ? small_pool_ : large_pool_, stream, size)) {
      stats_.num_alloc_retries++;
      return b;
    }
    release_cached_segments();
    if (!api_->malloc(&p, seg)) {
      stats_.num_ooms++;
      throw_oom(nbytes, seg);
    }
    stats_.num_alloc_retries++;
  }
  device_mallocs_++;
  auto* b = new Block();
  b->ptr = static_cast<char*>(p);
  b->size = seg;
  b->stream = stream;
  b->small = small;
  segments_.emplace(b->ptr, Segment{b, seg});
  stats_.reserved_bytes += static_cast<int64_t>(seg);
  stats_.num_segments++;
  return b;
}

void CachingAllocator::split(Block* b, size_t size) {
  size_t rest = b->size - size;
  bool keep = b->small ? rest >= kMinBlockSize : rest > kLargeSplitRemainder;
  if (!keep) return;
  auto* r = new Block();
  r->ptr = b->ptr + size;
  r->size = rest;
  r->stream = b->stream;
  r->small = b->small;
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  // r's neighbours are b (about to be allocated) and b's old successor, which was not cached
  // (invariant 2), so r needs no merging.
  pool_for(r).insert(r);
}

void CachingAllocator::free_block(Block* b) {
  Pool& pool = pool_for(b);
  if (b->prev && b->prev->cached()) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (b->next && b->next->cached()) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::release(void* ctx, void* ptr) { static_cast<CachingAllocator*>(ctx)->free_ptr(ptr); }

void CachingAllocator::release_empty(void* ctx, void*) {
  auto* self = static_cast<CachingAllocator*>(ctx);
  std::lock_guard<std::mutex> g(self->mu_);
  self->stats_.num_frees++;
}

void CachingAllocator::free_ptr(void* ptr) noexcept {
  std::lock_guard<std::mutex> g(mu_);
  auto it = active_.find(ptr);
  if (it == active_.end()) {
    // Only a bug elsewhere gets here; a deleter must not throw, so say so and keep going.
    std::fprintf(stderr, "graft: CUDA caching allocator: free of unknown pointer %p ignored\n", ptr);
    return;
  }
  Block* b = it->second;
  active_.erase(it);
  b->allocated = false;
  stats_.allocated_bytes -= static_cast<int64_t>(b->size);
  stats_.num_frees++;
  requested_bytes_ -= static_cast<int64_t>(b->requested);
  b->requested = 0;
  try {
    for (StreamId s : b->used_on) {
      EventId ev = api_->record_event(s);
      if (ev == 0) continue;
      events_.emplace_back(ev, b);
      b->pending_events++;
    }
  } catch (...) {
    // record_event must not throw; if it does anyway, the events recorded so far still guard
    // the block.
  }
  b->used_on.clear();
  if (b->pending_events == 0) free_block(b);
}

void CachingAllocator::record_stream(const void* ptr, StreamId stream) {
  if (ptr == nullptr) return;  // an empty storage owns no block
  std::lock_guard<std::mutex> g(mu_);
  auto it = active_.find(ptr);
  GRAFT_CHECK(it != active_.end(), "record_stream: pointer ", ptr, " was not allocated by the CUDA caching allocator ",
              "of device cuda:", device_index_, " or has already been freed");
  Block* b = it->second;
  if (stream == b->stream) return;  // its own stream orders its uses already
  if (std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end()) b->used_on.push_back(stream);
}

void CachingAllocator::process_events() {
  if (events_.empty()) return;
  // Events on different streams complete in any order, so every one is polled. If a query throws,
  // the events not yet seen complete stay queued, so no block is released twice or lost.
  std::vector<std::pair<EventId, Block*>> waiting;
  size_t i = 0;
  try {
    for (; i < events_.size(); ++i) {
      auto [ev, b] = events_[i];
      if (api_->event_done(ev)) {
        api_->release_event(ev);
        if (--b->pending_events == 0) free_block(b);
      } else {
        waiting.push_back(events_[i]);
      }
    }
  } catch (...) {
    waiting.insert(waiting.end(), events_.begin() + static_cast<std::ptrdiff_t>(i), events_.end());
    events_.swap(waiting);
    throw;
  }
  events_.swap(waiting);
}

void CachingAllocator::synchronize_events() {
  size_t i = 0;
  try {
    for (; i < events_.size(); ++i) {
      auto [ev, b] = events_[i];
      api_->synchronize_event(ev);
      api_->release_event(ev);
      if (--b->pending_events == 0) free_block(b);
    }
  } catch (...) {
    events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(i));
    throw;
  }
  events_.clear();
}

void CachingAllocator::release_cached_segments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      // Erase and count first: if the device call throws, the books still match what is held.
      it = pool->erase(it);
      segments_.erase(b->ptr);
      stats_.reserved_bytes -= static_cast<int64_t>(b->size);
      stats_.num_segments--;
      device_frees_++;
      void* p = b->ptr;
      delete b;
      api_->free(p);
    }
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  synchronize_events();
  release_cached_segments();
}

void CachingAllocator::throw_oom(size_t nbytes, size_t segment) {
  size_t dev_free = 0, dev_total = 0;
  bool have_info = true;
  try {
    api_->mem_get_info(&dev_free, &dev_total);
  } catch (...) {
    have_info = false;
  }
  int64_t cached = stats_.reserved_bytes - stats_.allocated_bytes;
  std::ostringstream os;
  os << "CUDA out of memory on cuda:" << device_index_ << ": tried to allocate " << format_bytes(int64_t(nbytes))
     << " (" << nbytes << " bytes; a new segment of " << segment << " bytes). " << format_bytes(stats_.allocated_bytes)
     << " (" << stats_.allocated_bytes << " bytes) allocated by graft, " << format_bytes(stats_.reserved_bytes) << " ("
     << stats_.reserved_bytes << " bytes) reserved by the caching allocator (" << format_bytes(cached)
     << " cached but unusable for this request)";
  if (have_info)
    os << "; the device has " << format_bytes(int64_t(dev_free)) << " (" << dev_free << " bytes) free of "
       << format_bytes(int64_t(dev_total)) << " total";
  os << ". Free tensors you no longer need, or use smaller batches.";
  GRAFT_ERROR(os.str());
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

CachingAllocatorStats CachingAllocator::detailed_stats() const {
  std::lock_guard<std::mutex> g(mu_);
  CachingAllocatorStats s;
  s.totals = stats_;
  s.requested_bytes = requested_bytes_;
  s.num_device_mallocs = device_mallocs_;
  s.num_device_frees = device_frees_;
  s.num_pending_events = static_cast<int64_t>(events_.size());
  for (const auto& [addr, seg] : segments_) {
    PoolStats& p = seg.head->small ? s.small_pool : s.large_pool;
    p.num_segments++;
    p.reserved_bytes += static_cast<int64_t>(seg.size);
    for (const Block* b = seg.head; b; b = b->next) {
      auto n = static_cast<int64_t>(b->size);
      if (b->allocated) {
        p.num_allocated_blocks++;
        p.allocated_bytes += n;
      } else if (b->pending_events > 0) {
        p.num_pending_blocks++;
        p.pending_bytes += n;
      } else {
        p.num_cached_blocks++;
        p.cached_bytes += n;
        p.largest_cached_block = std::max(p.largest_cached_block, n);
      }
    }
  }
  return s;
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<SegmentSnapshot> out;
  out.reserve(segments_.size());
  for (const auto& [addr, seg] : segments_) {
    SegmentSnapshot s;
    s.address = reinterpret_cast<uintptr_t>(seg.head->ptr);
    s.size = seg.size;
    s.stream = seg.head->stream;
    s.small_pool = seg.head->small;
    for (const Block* b = seg.head; b; b = b->next)
      s.blocks.push_back(
          BlockSnapshot{reinterpret_cast<uintptr_t>(b->ptr), b->size, b->requested, b->allocated, b->pending_events > 0});
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  return out;
}

}  // namespace graft::cuda
