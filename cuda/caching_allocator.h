#pragma once
// CachingAllocator: device memory for one GPU, cached so that the steady state of a training loop
// makes no cudaMalloc/cudaFree calls at all (both synchronise the device and cost ~100 us each).
//
// Plain C++: every device call goes through the DeviceMemoryApi below, so the whole allocator is
// tested on machines without a GPU against a fake device (tests/cuda/test_caching_allocator.cpp).
// cuda/cuda_allocator.cpp plugs in the real API over cudaMalloc/cudaFree/cudaEvent*.
//
// Layout. A *segment* is one device allocation. It is cut into *blocks* that tile it without gaps:
// a doubly linked list, in address order, of blocks that are either allocated (owned by exactly one
// DataPtr), pending (freed by their owner, but a stream named with record_stream may still use
// them) or cached (free, reusable, sitting in their pool's size-ordered set).
//
// Sizes and pools (the constants are below):
// - Every request is rounded up to a multiple of 512 bytes, so block addresses inside a segment
//   stay 512-byte aligned (cudaMalloc itself returns 256-byte aligned memory) and a block never
//   splits into slivers too small to be useful.
// - Requests of at most 1 MiB come from the small pool, carved from 2 MiB segments; larger ones
//   from the large pool. Keeping tiny, short-lived tensors out of the big segments stops them
//   from pinning a 20 MiB segment in place and fragmenting the memory large tensors need.
// - Large-pool segments: 20 MiB for requests under 10 MiB (so several mid-sized tensors share one
//   device allocation), otherwise the request rounded up to 2 MiB (so a huge tensor wastes at
//   most 2 MiB).
// - Splitting: a found block bigger than the request is split when the remainder is >= 512 bytes
//   in the small pool and > 1 MiB in the large pool. Below that the whole block is handed out:
//   a large-pool sliver of <= 1 MiB could only ever serve small-pool-sized requests, which never
//   look in the large pool, so keeping it separate would only fragment the segment.
//
// Invariants, and why they hold:
// 1. Blocks of a segment tile it exactly (sum of sizes == segment size, each block starts where
//    its predecessor ends): splitting cuts one block in two adjacent ones and merging joins two
//    adjacent ones; nothing else changes a block's extent.
// 2. No two address-adjacent blocks are both cached: every block that becomes cached goes through
//    free_block(), which merges it with a cached predecessor and successor first; a split leaves
//    its remainder next to the (now allocated) front part and to the old block's successor, which
//    was not cached by this same invariant.
// 3. A cached block is in exactly one pool set, and only cached blocks are: blocks enter a set only
//    in free_block() and are erased from it before being allocated or merged away.
// 4. A block is handed only to requests on the stream it was allocated on (the set is ordered by
//    stream first, and lookup never crosses streams), and every block of a segment has the
//    segment's stream. Work queued on one stream is ordered, so a block freed on its own stream can
//    be reused on that stream at once without any synchronisation.
// 5. A block used on another stream (record_stream) becomes reusable only after an event recorded
//    on each such stream at free time has completed: until then it is pending (not cached), so
//    it is neither handed out nor merged into a neighbour.
// 6. Statistics are exact: allocated_bytes is the sum of allocated blocks' sizes (rounded bytes,
//    as PyTorch reports them), reserved_bytes the sum of held segments' sizes, num_segments their
//    count; every change to blocks and segments happens under the one mutex together with the
//    counter update. detailed_stats() recomputes the per-pool figures by walking the segments.
// 7. The device is asked to free only whole cached segments (a single cached block spanning the
//    segment), so no memory a DataPtr or a pending stream still uses is ever returned.
//
// Out of memory: when the device cannot provide a new segment, every pending event is waited for
// (a block it releases may now serve the request), all whole cached segments are returned to the
// device and the device allocation is retried once; num_alloc_retries counts requests served this
// way. If that fails too, num_ooms is bumped and a graft::Error names the request size and the
// allocated, reserved and device free/total byte counts. No smaller fallback segment is tried.
//
// Lifetime: the DataPtr deleters call back into the allocator, so it must outlive every Storage it
// allocated (the CUDA backend's allocators are leaked on purpose for this reason; tests destroy
// their tensors before their allocator). The destructor waits for pending events, then returns
// the whole cached segments; segments with live blocks are leaked rather than freed under them.
// Thread safety: one mutex guards all state, including the calls into the DeviceMemoryApi, so an
// API implementation needs no locking of its own.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/allocator.h"

namespace graft::cuda {

// Opaque stream and event handles (a cudaStream_t / cudaEvent_t in the real API). 0 is the
// default stream; event 0 means "no event" (treated as already complete).
using StreamId = uintptr_t;
using EventId = uintptr_t;

// The device calls the caching allocator makes. All calls are made with the allocator's mutex held.
class DeviceMemoryApi {
 public:
  virtual ~DeviceMemoryApi() = default;
  // Allocates `nbytes` of device memory. Returns false when the device is out of memory; any
  // other failure throws graft::Error.
  virtual bool malloc(void** ptr, size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual void mem_get_info(size_t* free_bytes, size_t* total_bytes) = 0;
  // The stream a plain allocate() tags its block with (the calling thread's current stream).
  virtual StreamId current_stream() = 0;
  // Marks the current end of `stream`'s queued work. Called from DataPtr deleters, which cannot
  // throw: return 0 when no event could be recorded.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_done(EventId event) = 0;
  // Blocks until the event has completed.
  virtual void synchronize_event(EventId event) = 0;
  // The allocator is done with the event (the real API recycles it). Must not throw.
  virtual void release_event(EventId event) = 0;
};

// Per-pool figures, recomputed by walking the segments (cheap enough for tests and diagnostics).
struct PoolStats {
  int64_t num_segments = 0;
  int64_t reserved_bytes = 0;        // sum of this pool's segment sizes
  int64_t num_allocated_blocks = 0;
  int64_t allocated_bytes = 0;
  int64_t num_cached_blocks = 0;     // free and reusable now
  int64_t cached_bytes = 0;
  int64_t num_pending_blocks = 0;    // freed, waiting for record_stream events
  int64_t pending_bytes = 0;
  int64_t largest_cached_block = 0;
};

struct CachingAllocatorStats {
  MemoryStats totals;              // the same figures as stats()
  int64_t requested_bytes = 0;     // live allocations' sizes before rounding
  PoolStats small_pool;
  PoolStats large_pool;
  int64_t num_device_mallocs = 0;  // successful DeviceMemoryApi::malloc calls since construction
  int64_t num_device_frees = 0;
  int64_t num_pending_events = 0;  // recorded by record_stream users, not yet seen complete
};

// One segment as snapshot() sees it, blocks in address order.
struct BlockSnapshot {
  uintptr_t address = 0;
  size_t size = 0;
  size_t requested = 0;  // 0 unless allocated
  bool allocated = false;
  bool pending = false;  // freed, waiting for events
};
struct SegmentSnapshot {
  uintptr_t address = 0;
  size_t size = 0;
  StreamId stream = 0;
  bool small_pool = false;
  std::vector<BlockSnapshot> blocks;
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlockSize = 512;             // rounding granularity
  static constexpr size_t kSmallRequest = 1 << 20;         // <= this: small pool
  static constexpr size_t kSmallSegment = 2 << 20;         // small-pool segment size
  static constexpr size_t kLargeSegment = 20 << 20;        // large-pool segment for mid-sized requests
  static constexpr size_t kMidRequest = 10 << 20;          // requests below this share kLargeSegment
  static constexpr size_t kLargeRounding = 2 << 20;        // larger requests: rounded to this
  static constexpr size_t kLargeSplitRemainder = 1 << 20;  // large pool splits when remainder > this

  // `api` must outlive the allocator; `device_index` goes into the DataPtrs' Device.
  explicit CachingAllocator(DeviceMemoryApi* api, int device_index = 0);
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // On the API's current stream.
  DataPtr allocate(size_t nbytes) override;
  DataPtr allocate(size_t nbytes, StreamId stream);
  // `ptr` (returned by allocate and not yet freed) is also used by work queued on `stream`: when
  // it is freed, the block is not reused until that work has finished.
  void record_stream(const void* ptr, StreamId stream);

  MemoryStats stats() const override;
  CachingAllocatorStats detailed_stats() const;
  std::vector<SegmentSnapshot> snapshot() const;
  void reset_peak_stats() override;
  // Waits for pending events, then returns every whole cached segment to the device.
  void empty_cache() override;

  int device_index() const { return device_index_; }
  static size_t round_size(size_t nbytes);
  // The device allocation made for a (rounded) request that no cached block can serve.
  static size_t segment_size(size_t rounded);

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    StreamId stream = 0;
    bool small = false;
    bool allocated = false;
    int pending_events = 0;
    Block* prev = nullptr;  // address-adjacent blocks of the same segment
    Block* next = nullptr;
    std::vector<StreamId> used_on;  // other streams named by record_stream while allocated
    bool cached() const { return !allocated && pending_events == 0; }
  };
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;
  struct Segment {
    Block* head = nullptr;  // the lowest-address block; it survives every merge
    size_t size = 0;
  };

  static void release(void* ctx, void* ptr);
  static void release_empty(void* ctx, void* ptr);
  void free_ptr(void* ptr) noexcept;
  Pool& pool_for(const Block* b) { return b->small ? small_pool_ : large_pool_; }
  Block* take_cached(Pool& pool, StreamId stream, size_t size);
  // A fresh segment's single block for a request no cached block serves; on device OOM it waits
  // for pending events, frees the cache and retries once, then throws.
  Block* new_segment(size_t nbytes, size_t size, bool small, StreamId stream);
  void split(Block* b, size_t size);
  void free_block(Block* b);
  void process_events();
  void synchronize_events();
  void release_cached_segments();
  [[noreturn]] void throw_oom(size_t nbytes, size_t segment);

  DeviceMemoryApi* api_;
  int device_index_;
  mutable std::mutex mu_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<const void*, Block*> active_;  // allocated blocks by address
  std::unordered_map<const void*, Segment> segments_;
  std::vector<std::pair<EventId, Block*>> events_;  // pending record_stream events
  MemoryStats stats_;
  int64_t requested_bytes_ = 0;
  int64_t device_mallocs_ = 0;
  int64_t device_frees_ = 0;
};

// "1.50 MiB"-style text for messages.
std::string format_bytes(int64_t bytes);

}  // namespace graft::cuda
