// The CUDA caching allocator's logic against a fake device with a fixed capacity: rounding, pools,
// split/merge, best fit, reuse, streams and record_stream, OOM handling, empty_cache, statistics,
// fragmentation, thread safety and randomized churn. Runs on every machine; no CUDA needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cuda/caching_allocator.h"
#include "graft.h"
#include "ops/kernel_utils.h"

using namespace graft;
using graft::cuda::CachingAllocator;
using graft::cuda::CachingAllocatorStats;
using graft::cuda::EventId;
using graft::cuda::SegmentSnapshot;
using graft::cuda::StreamId;

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

// A device with `capacity` bytes. It hands out fake addresses it never dereferences (neither does
// the allocator), spaced so that two segments are never address-adjacent, and counts every call.
// Events complete only when a test says so (or when synchronized).
class FakeDeviceApi final : public cuda::DeviceMemoryApi {
 public:
  explicit FakeDeviceApi(size_t capacity) : capacity_(capacity) {}

  bool malloc(void** ptr, size_t n) override {
    malloc_calls++;
    if (used_ + n > capacity_) {
      failed_mallocs++;
      return false;
    }
    uintptr_t addr = next_;
    next_ += (n + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;
    live_[addr] = n;
    used_ += n;
    *ptr = reinterpret_cast<void*>(addr);
    return true;
  }
  void free(void* ptr) override {
    free_calls++;
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) {
      bad_frees++;
      return;
    }
    used_ -= it->second;
    live_.erase(it);
  }
  void mem_get_info(size_t* free_bytes, size_t* total_bytes) override {
    *free_bytes = capacity_ - used_;
    *total_bytes = capacity_;
  }
  StreamId current_stream() override { return stream; }
  EventId record_event(StreamId s) override {
    EventId id = ++next_event_;
    events_[id] = Event{s, false};
    return id;
  }
  bool event_done(EventId e) override {
    auto it = events_.find(e);
    if (it == events_.end()) {
      bad_events++;
      return true;
    }
    return it->second.done;
  }
  void synchronize_event(EventId e) override {
    sync_calls++;
    auto it = events_.find(e);
    if (it == events_.end()) bad_events++;
    else it->second.done = true;
  }
  void release_event(EventId e) override {
    if (events_.erase(e) == 0) bad_events++;
  }

  // Test controls (not called while another thread uses the allocator).
  void complete_stream(StreamId s) {
    for (auto& [id, ev] : events_)
      if (ev.stream == s) ev.done = true;
  }
  void complete_all() {
    for (auto& [id, ev] : events_) ev.done = true;
  }
  size_t used() const { return used_; }
  size_t live_segments() const { return live_.size(); }
  size_t live_events() const { return events_.size(); }

  StreamId stream = 0;
  int64_t malloc_calls = 0, failed_mallocs = 0, free_calls = 0, bad_frees = 0, sync_calls = 0, bad_events = 0;

 private:
  struct Event {
    StreamId stream;
    bool done;
  };
  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_ = uintptr_t{1} << 40;
  std::map<uintptr_t, size_t> live_;
  std::map<EventId, Event> events_;
  EventId next_event_ = 0;
};

void release(const DataPtr& p) { p.deleter(p.ctx, p.ptr); }
uintptr_t addr(const DataPtr& p) { return reinterpret_cast<uintptr_t>(p.ptr); }
int64_t device_mallocs(const FakeDeviceApi& api) { return api.malloc_calls - api.failed_mallocs; }

// Checks the header's invariants from a snapshot: blocks tile their segment, no two adjacent
// cached blocks, and the totals agree with stats() and with what the fake device holds.
void check_invariants(const CachingAllocator& a, const FakeDeviceApi& api) {
  MemoryStats s = a.stats();
  int64_t allocated = 0, reserved = 0;
  std::vector<SegmentSnapshot> segs = a.snapshot();
  for (const SegmentSnapshot& seg : segs) {
    REQUIRE_FALSE(seg.blocks.empty());
    uintptr_t at = seg.address;
    bool prev_cached = false;
    for (const auto& b : seg.blocks) {
      REQUIRE(b.address == at);
      REQUIRE(b.size % CachingAllocator::kMinBlockSize == 0);
      bool cached = !b.allocated && !b.pending;
      REQUIRE_FALSE((cached && prev_cached));
      prev_cached = cached;
      if (b.allocated) allocated += static_cast<int64_t>(b.size);
      at += b.size;
    }
    REQUIRE(at == seg.address + seg.size);
    reserved += static_cast<int64_t>(seg.size);
  }
  REQUIRE(allocated == s.allocated_bytes);
  REQUIRE(reserved == s.reserved_bytes);
  REQUIRE(static_cast<int64_t>(segs.size()) == s.num_segments);
  REQUIRE(static_cast<int64_t>(api.used()) == s.reserved_bytes);
  REQUIRE(api.live_segments() == segs.size());
  REQUIRE(api.bad_frees == 0);
  REQUIRE(api.bad_events == 0);
  REQUIRE(s.peak_allocated_bytes >= s.allocated_bytes);
  CachingAllocatorStats d = a.detailed_stats();
  REQUIRE(d.small_pool.allocated_bytes + d.large_pool.allocated_bytes == s.allocated_bytes);
  REQUIRE(d.small_pool.reserved_bytes + d.large_pool.reserved_bytes == s.reserved_bytes);
  REQUIRE(d.small_pool.allocated_bytes + d.small_pool.cached_bytes + d.small_pool.pending_bytes ==
          d.small_pool.reserved_bytes);
  REQUIRE(d.large_pool.allocated_bytes + d.large_pool.cached_bytes + d.large_pool.pending_bytes ==
          d.large_pool.reserved_bytes);
}

// The block containing `address` in the snapshot (REQUIREs that there is one).
cuda::BlockSnapshot block_at(const CachingAllocator& a, uintptr_t address) {
  for (const auto& seg : a.snapshot())
    for (const auto& b : seg.blocks)
      if (b.address == address) return b;
  FAIL("no block starts at " << address);
  return {};
}

}  // namespace

TEST_CASE("requests are rounded up to multiples of 512 bytes") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(1000) == 1024);
  CHECK(CachingAllocator::round_size(MiB + 1) == MiB + 512);
  CHECK_THROWS_WITH(CachingAllocator::round_size(SIZE_MAX - 3), Catch::Contains("overflows"));

  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr p = a.allocate(1000);
  CHECK(p.ptr != nullptr);
  CHECK(p.device == Device("cuda:0"));
  CHECK(addr(p) % 512 == 0);
  CHECK(a.stats().allocated_bytes == 1024);
  CHECK(a.detailed_stats().requested_bytes == 1000);
  DataPtr q = a.allocate(1);
  CHECK(addr(q) == addr(p) + 1024);  // the next block starts at the rounded end
  CHECK(a.stats().allocated_bytes == 1024 + 512);
  release(p);
  release(q);
  CHECK(a.stats().allocated_bytes == 0);
  CHECK(a.detailed_stats().requested_bytes == 0);
  check_invariants(a, api);
}

TEST_CASE("requests up to 1 MiB use 2 MiB small-pool segments, larger ones the large pool") {
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(12 * MiB + 512) == 14 * MiB);

  FakeDeviceApi api(128 * MiB);
  CachingAllocator a(&api);
  DataPtr s = a.allocate(MiB);
  DataPtr l = a.allocate(MiB + 1);
  DataPtr h = a.allocate(20 * MiB + 1);  // too big for l's cached remainder: its own 22 MiB segment
  CachingAllocatorStats d = a.detailed_stats();
  CHECK(d.small_pool.num_segments == 1);
  CHECK(d.small_pool.reserved_bytes == int64_t(2 * MiB));
  CHECK(d.small_pool.allocated_bytes == int64_t(MiB));
  CHECK(d.large_pool.num_segments == 2);
  CHECK(d.large_pool.reserved_bytes == int64_t(20 * MiB + 22 * MiB));
  CHECK(d.num_device_mallocs == 3);
  // A small request never takes memory from the large pool's cached remainder, and vice versa.
  DataPtr s2 = a.allocate(600 * KiB);
  DataPtr l2 = a.allocate(2 * MiB);
  d = a.detailed_stats();
  CHECK(d.small_pool.num_segments == 1);
  CHECK(d.large_pool.num_segments == 2);
  CHECK(d.num_device_mallocs == 3);
  check_invariants(a, api);
  for (auto* p : {&s, &l, &h, &s2, &l2}) release(*p);
  check_invariants(a, api);
}

TEST_CASE("a block is split and its remainder serves the next request without a device malloc") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr p = a.allocate(1000);
  auto segs = a.snapshot();
  REQUIRE(segs.size() == 1);
  REQUIRE(segs[0].blocks.size() == 2);
  CHECK(segs[0].blocks[0].allocated);
  CHECK(segs[0].blocks[0].size == 1024);
  CHECK_FALSE(segs[0].blocks[1].allocated);
  CHECK(segs[0].blocks[1].size == 2 * MiB - 1024);
  DataPtr q = a.allocate(4096);
  CHECK(addr(q) == addr(p) + 1024);
  CHECK(device_mallocs(api) == 1);
  CHECK(a.detailed_stats().small_pool.num_cached_blocks == 1);
  check_invariants(a, api);
  release(p);
  release(q);
  // Everything merged back into one block spanning the segment.
  segs = a.snapshot();
  REQUIRE(segs[0].blocks.size() == 1);
  CHECK(segs[0].blocks[0].size == 2 * MiB);
  check_invariants(a, api);
}

TEST_CASE("a large-pool remainder of at most 1 MiB stays with the block") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr first = a.allocate(2 * MiB);  // 20 MiB segment: 2 MiB + an 18 MiB remainder
  CHECK(a.detailed_stats().large_pool.largest_cached_block == int64_t(18 * MiB));
  DataPtr rest = a.allocate(17 * MiB + 512 * KiB);  // leaves 512 KiB: not split off
  CHECK(addr(rest) == addr(first) + 2 * MiB);
  CHECK(block_at(a, addr(rest)).size == 18 * MiB);
  CHECK(a.stats().allocated_bytes == int64_t(20 * MiB));
  CHECK(a.detailed_stats().large_pool.num_cached_blocks == 0);
  // A remainder just over 1 MiB is split off.
  release(rest);
  DataPtr r2 = a.allocate(17 * MiB - 512);
  CHECK(block_at(a, addr(r2)).size == 17 * MiB - 512);
  CHECK(a.detailed_stats().large_pool.cached_bytes == int64_t(MiB + 512));
  // A small-pool remainder of just 512 bytes is still split off.
  DataPtr s = a.allocate(MiB);
  DataPtr t = a.allocate(MiB - 512);
  CHECK(block_at(a, addr(t)).size == MiB - 512);
  CHECK(block_at(a, addr(t) + MiB - 512).size == 512);
  CHECK(a.detailed_stats().small_pool.cached_bytes == 512);
  check_invariants(a, api);
  release(first);
  release(r2);
  release(s);
  release(t);
  check_invariants(a, api);
  CHECK(device_mallocs(api) == 2);
}

TEST_CASE("freed neighbours merge into one block that serves a bigger request without a device malloc") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr x = a.allocate(256 * KiB);
  DataPtr y = a.allocate(256 * KiB);
  DataPtr z = a.allocate(256 * KiB);
  DataPtr w = a.allocate(256 * KiB);
  REQUIRE(addr(y) == addr(x) + 256 * KiB);
  SECTION("free A then its neighbour B gives one block") {
    release(x);
    release(y);
    CHECK(block_at(a, addr(x)).size == 512 * KiB);
    CHECK(a.detailed_stats().small_pool.num_cached_blocks == 2);  // x+y, and the tail after w
    DataPtr big = a.allocate(512 * KiB);
    CHECK(big.ptr == x.ptr);
    CHECK(device_mallocs(api) == 1);
    release(big);
    release(z);
    release(w);
  }
  SECTION("a block freed between two cached neighbours joins both") {
    release(x);
    release(z);
    CHECK(a.detailed_stats().small_pool.num_cached_blocks == 3);
    release(y);
    CHECK(block_at(a, addr(x)).size == 768 * KiB);
    CHECK(a.detailed_stats().small_pool.num_cached_blocks == 2);
    DataPtr big = a.allocate(768 * KiB);
    CHECK(big.ptr == x.ptr);
    CHECK(device_mallocs(api) == 1);
    release(big);
    release(w);
  }
  SECTION("the last block merges with the segment's cached tail") {
    release(w);
    CHECK(block_at(a, addr(w)).size == 2 * MiB - 768 * KiB);
    release(x);
    release(y);
    release(z);
  }
  check_invariants(a, api);
  CachingAllocatorStats d = a.detailed_stats();
  CHECK(d.totals.allocated_bytes == 0);
  CHECK(d.small_pool.num_cached_blocks == 1);
  CHECK(d.small_pool.cached_bytes == int64_t(2 * MiB));
}

TEST_CASE("best fit picks the smallest cached block that is large enough") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr h8 = a.allocate(8 * KiB);
  DataPtr s1 = a.allocate(512);
  DataPtr h4 = a.allocate(4 * KiB);
  DataPtr s2 = a.allocate(512);
  DataPtr h16 = a.allocate(16 * KiB);
  DataPtr s3 = a.allocate(512);
  release(h8);
  release(h4);
  release(h16);
  // Cached now: 8 KiB, 4 KiB, 16 KiB holes and the ~2 MiB tail.
  DataPtr p3 = a.allocate(3 * KiB);
  CHECK(p3.ptr == h4.ptr);
  DataPtr p6 = a.allocate(6 * KiB);
  CHECK(p6.ptr == h8.ptr);
  DataPtr p12 = a.allocate(12 * KiB);
  CHECK(p12.ptr == h16.ptr);
  // The 1 KiB left of the 4 KiB hole is an exact fit, preferred over the bigger remainders.
  DataPtr p1 = a.allocate(KiB);
  CHECK(addr(p1) == addr(h4) + 3 * KiB);
  CHECK(device_mallocs(api) == 1);
  check_invariants(a, api);
  for (DataPtr* p : {&s1, &s2, &s3, &p3, &p6, &p12, &p1}) release(*p);
  check_invariants(a, api);
}

TEST_CASE("a freed block is reused without a new device malloc") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  uintptr_t first = 0;
  for (int i = 0; i < 100; ++i) {
    DataPtr p = a.allocate(i % 2 ? 3 * MiB : 100 * KiB);
    DataPtr q = a.allocate(100 * KiB);
    if (i == 0) first = addr(p);
    if (i % 2 == 0) CHECK(addr(p) == first);
    release(p);
    release(q);
  }
  CHECK(device_mallocs(api) == 2);  // one small and one large segment for all 200 requests
  MemoryStats s = a.stats();
  CHECK(s.num_allocs == 200);
  CHECK(s.num_frees == 200);
  CHECK(s.num_segments == 2);
  check_invariants(a, api);
}

TEST_CASE("a block freed on one stream is not handed to another stream") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr p = a.allocate(4096, 1);
  uintptr_t p_addr = addr(p);
  release(p);
  DataPtr q = a.allocate(4096, 2);
  CHECK(addr(q) != p_addr);
  CHECK(device_mallocs(api) == 2);
  DataPtr r = a.allocate(4096, 1);
  CHECK(addr(r) == p_addr);
  // The plain allocate() uses the API's current stream.
  api.stream = 2;
  DataPtr s = a.allocate(4096);
  CHECK(addr(s) == addr(q) + 4096);
  auto segs = a.snapshot();
  REQUIRE(segs.size() == 2);
  CHECK(segs[0].stream == 1);
  CHECK(segs[1].stream == 2);
  CHECK(device_mallocs(api) == 2);
  for (DataPtr* x : {&q, &r, &s}) release(*x);
  check_invariants(a, api);
}

TEST_CASE("record_stream keeps a freed block out of reuse until the other stream's event completes") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr p = a.allocate(64 * KiB, 0);
  a.record_stream(p.ptr, 7);
  a.record_stream(p.ptr, 7);  // once per stream is enough
  a.record_stream(p.ptr, 0);  // its own stream needs no event
  release(p);
  CHECK(api.live_events() == 1);
  auto d = a.detailed_stats();
  CHECK(d.num_pending_events == 1);
  CHECK(d.small_pool.num_pending_blocks == 1);
  CHECK(d.small_pool.pending_bytes == int64_t(64 * KiB));
  CHECK(d.totals.allocated_bytes == 0);
  check_invariants(a, api);

  // Still pending: a same-sized request gets other memory.
  DataPtr q = a.allocate(64 * KiB, 0);
  CHECK(q.ptr != p.ptr);
  CHECK(a.detailed_stats().small_pool.num_pending_blocks == 1);

  api.complete_stream(7);
  DataPtr r = a.allocate(64 * KiB, 0);
  CHECK(r.ptr == p.ptr);
  CHECK(api.live_events() == 0);
  CHECK(a.detailed_stats().num_pending_events == 0);
  CHECK(device_mallocs(api) == 1);

  SECTION("a pending block merges with its cached neighbours once its event completes") {
    release(q);  // q sits between r and the tail: merges with the tail
    a.record_stream(r.ptr, 3);
    a.record_stream(r.ptr, 4);
    release(r);
    CHECK(api.live_events() == 2);
    CHECK(a.snapshot()[0].blocks.size() == 2);  // pending r, cached rest
    api.complete_stream(3);
    release(a.allocate(1, 0));  // any allocation polls the events
    CHECK(a.snapshot()[0].blocks.size() == 2);  // still waiting for stream 4
    api.complete_stream(4);
    release(a.allocate(1, 0));
    auto segs = a.snapshot();
    REQUIRE(segs[0].blocks.size() == 1);
    CHECK(segs[0].blocks[0].size == 2 * MiB);
  }
  SECTION("empty_cache waits for pending events and then frees the segment") {
    release(q);
    a.record_stream(r.ptr, 9);
    release(r);
    a.empty_cache();
    CHECK(api.sync_calls == 1);
    CHECK(api.live_events() == 0);
    CHECK(a.stats().reserved_bytes == 0);
  }
  check_invariants(a, api);
}

TEST_CASE("record_stream on a pointer the allocator does not own is an error") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  int x = 0;
  CHECK_THROWS_WITH(a.record_stream(&x, 1), Catch::Contains("record_stream") && Catch::Contains("not allocated"));
  DataPtr p = a.allocate(100);
  release(p);
  CHECK_THROWS_AS(a.record_stream(p.ptr, 1), graft::Error);
  a.record_stream(nullptr, 1);  // an empty storage: nothing to do
}

TEST_CASE("out of memory frees the cache and retries once") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr x = a.allocate(30 * MiB);
  DataPtr y = a.allocate(30 * MiB);
  release(x);
  release(y);
  CHECK(a.stats().reserved_bytes == int64_t(60 * MiB));
  DataPtr z = a.allocate(40 * MiB);  // no cached block fits and the device has only 4 MiB left
  MemoryStats s = a.stats();
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_ooms == 0);
  CHECK(s.reserved_bytes == int64_t(40 * MiB));
  CHECK(s.num_segments == 1);
  CHECK(api.free_calls == 2);
  CHECK(api.failed_mallocs == 1);
  release(z);
  check_invariants(a, api);
}

TEST_CASE("out of memory first reuses blocks that waited for other streams") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr keep = a.allocate(10 * MiB);  // pins its segment: empty_cache could not free it
  DataPtr x = a.allocate(40 * MiB);
  a.record_stream(x.ptr, 5);
  release(x);  // pending until stream 5's event completes
  DataPtr y = a.allocate(40 * MiB);
  CHECK(y.ptr == x.ptr);
  CHECK(api.sync_calls == 1);
  CHECK(a.stats().num_alloc_retries == 1);
  CHECK(device_mallocs(api) == 2);
  release(y);
  release(keep);
  check_invariants(a, api);
}

TEST_CASE("out of memory that persists throws an error naming the request and the memory figures") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  DataPtr x = a.allocate(30 * MiB);  // 30 MiB segment
  DataPtr c = a.allocate(12 * MiB);  // 12 MiB segment, cached after the free below
  DataPtr d = a.allocate(2 * MiB);   // 20 MiB segment: 18 MiB cached but unusable for 25 MiB
  release(c);
  CHECK(a.stats().reserved_bytes == int64_t(62 * MiB));
  // 25 MiB needs a 26 MiB segment: 62 + 26 > 64, and after freeing the cached 12 MiB, 50 + 26 > 64.
  std::string msg;
  try {
    a.allocate(25 * MiB);
    FAIL("expected an out-of-memory error");
  } catch (const graft::Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("out of memory"));
  CHECK_THAT(msg, Catch::Contains("cuda:0"));
  CHECK_THAT(msg, Catch::Contains("25.00 MiB") && Catch::Contains(std::to_string(25 * MiB) + " bytes"));
  CHECK_THAT(msg, Catch::Contains("32.00 MiB (" + std::to_string(32 * MiB) + " bytes) allocated"));
  CHECK_THAT(msg, Catch::Contains("50.00 MiB (" + std::to_string(50 * MiB) + " bytes) reserved"));
  CHECK_THAT(msg, Catch::Contains("14.00 MiB (" + std::to_string(14 * MiB) + " bytes) free of 64.00 MiB total"));
  MemoryStats s = a.stats();
  CHECK(s.num_ooms == 1);
  CHECK(s.num_alloc_retries == 0);
  CHECK(s.allocated_bytes == int64_t(32 * MiB));
  CHECK(s.reserved_bytes == int64_t(50 * MiB));
  check_invariants(a, api);
  // The allocator is still usable after the error.
  DataPtr ok = a.allocate(MiB);
  CHECK(ok.ptr != nullptr);
  release(ok);
  release(x);
  release(d);
  check_invariants(a, api);
}

TEST_CASE("empty_cache returns every whole cached segment to the device") {
  FakeDeviceApi api(256 * MiB);
  CachingAllocator a(&api);
  DataPtr s1 = a.allocate(KiB, 0);
  DataPtr s2 = a.allocate(KiB, 1);   // a second small segment (another stream)
  DataPtr l1 = a.allocate(3 * MiB);  // 20 MiB
  DataPtr l2 = a.allocate(50 * MiB);
  release(s2);
  release(l2);
  CHECK(a.stats().reserved_bytes == int64_t(4 * MiB + 70 * MiB));
  a.empty_cache();
  MemoryStats s = a.stats();
  CHECK(api.free_calls == 2);  // s2's and l2's segments; s1 and l1 still hold live blocks
  CHECK(s.reserved_bytes == int64_t(2 * MiB + 20 * MiB));
  CHECK(s.num_segments == 2);
  CHECK(s.allocated_bytes == int64_t(KiB + 3 * MiB));
  check_invariants(a, api);
  release(s1);
  release(l1);
  a.empty_cache();
  CHECK(api.free_calls == 4);
  CHECK(a.stats().reserved_bytes == 0);
  CHECK(a.stats().num_segments == 0);
  CHECK(api.used() == 0);
  a.empty_cache();  // nothing left: a no-op
  CHECK(api.free_calls == 4);
}

TEST_CASE("statistics are exact after a sequence of allocations and frees") {
  FakeDeviceApi api(128 * MiB);
  CachingAllocator a(&api);
  auto expect = [&](int64_t alloc, int64_t peak, int64_t reserved, int64_t allocs, int64_t frees, int64_t segs) {
    MemoryStats s = a.stats();
    CHECK(s.allocated_bytes == alloc);
    CHECK(s.peak_allocated_bytes == peak);
    CHECK(s.reserved_bytes == reserved);
    CHECK(s.num_allocs == allocs);
    CHECK(s.num_frees == frees);
    CHECK(s.num_segments == segs);
    CHECK(s.num_ooms == 0);
    CHECK(s.num_alloc_retries == 0);
  };
  const int64_t M = MiB;
  expect(0, 0, 0, 0, 0, 0);
  DataPtr a1 = a.allocate(100);  // 512 in a 2 MiB segment
  expect(512, 512, 2 * M, 1, 0, 1);
  DataPtr a2 = a.allocate(5 * MiB);  // 20 MiB segment
  expect(512 + 5 * M, 512 + 5 * M, 22 * M, 2, 0, 2);
  // Too big for the 15 MiB cached in a2's segment: an 18 MiB segment, whose remainder
  // (1 MiB - 512) is too small to split off, so the whole segment counts as allocated.
  DataPtr a3 = a.allocate(17 * MiB + 1);
  int64_t a3_size = 18 * M;
  expect(512 + 5 * M + a3_size, 512 + 5 * M + a3_size, 40 * M, 3, 0, 3);
  release(a2);
  expect(512 + a3_size, 512 + 5 * M + a3_size, 40 * M, 3, 1, 3);
  DataPtr a4 = a.allocate(2 * MiB);  // reuses the 20 MiB segment
  expect(512 + a3_size + 2 * M, 512 + 5 * M + a3_size, 40 * M, 4, 1, 3);
  a.reset_peak_stats();
  expect(512 + a3_size + 2 * M, 512 + a3_size + 2 * M, 40 * M, 4, 1, 3);
  release(a1);
  release(a3);
  release(a4);
  expect(0, 512 + a3_size + 2 * M, 40 * M, 4, 4, 3);
  a.empty_cache();
  expect(0, 512 + a3_size + 2 * M, 0, 4, 4, 0);
  CachingAllocatorStats d = a.detailed_stats();
  CHECK(d.num_device_mallocs == 3);
  CHECK(d.num_device_frees == 3);
  check_invariants(a, api);
}

TEST_CASE("zero-byte allocations take no memory but are counted") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api, 3);
  DataPtr p = a.allocate(0);
  CHECK(p.ptr == nullptr);
  CHECK(p.device == Device("cuda:3"));
  CHECK(a.stats().num_allocs == 1);
  CHECK(a.stats().reserved_bytes == 0);
  release(p);
  CHECK(a.stats().num_frees == 1);
  CHECK(api.malloc_calls == 0);
}

TEST_CASE("fragmentation: a request fits once freed neighbours merge, else it takes a new segment") {
  FakeDeviceApi api(128 * MiB);
  CachingAllocator a(&api);
  // One 20 MiB segment, interleaved 2 MiB (A) and 3 MiB (B) blocks, a 3 MiB tail stays cached.
  std::vector<DataPtr> as, bs;
  for (int i = 0; i < 4; ++i) {
    as.push_back(a.allocate(2 * MiB));
    if (i < 3) bs.push_back(a.allocate(3 * MiB));
  }
  REQUIRE(device_mallocs(api) == 1);
  REQUIRE(addr(as[3]) == addr(as[0]) + 15 * MiB);
  for (const DataPtr& p : as) release(p);  // free every other block
  CachingAllocatorStats d = a.detailed_stats();
  CHECK(d.large_pool.num_cached_blocks == 4);  // 2, 2, 2 and 2+3 MiB
  CHECK(d.large_pool.cached_bytes == int64_t(11 * MiB));
  CHECK(d.large_pool.largest_cached_block == int64_t(5 * MiB));

  // 11 MiB are cached, but no hole holds 6 MiB: a new segment.
  DataPtr six = a.allocate(6 * MiB);
  CHECK(device_mallocs(api) == 2);
  release(six);

  // Freeing B0 merges A0 + B0 + A1 into a 7 MiB hole; 6 MiB now fits without a device malloc
  // (best fit: the 7 MiB hole, not the fresh 20 MiB segment).
  release(bs[0]);
  CHECK(block_at(a, addr(as[0])).size == 7 * MiB);
  DataPtr six2 = a.allocate(6 * MiB);
  CHECK(six2.ptr == as[0].ptr);
  CHECK(device_mallocs(api) == 2);
  check_invariants(a, api);

  // six2 took the whole 7 MiB hole (a 1 MiB remainder is not split off in the large pool).
  CHECK(block_at(a, addr(six2)).size == 7 * MiB);
  // A request larger than any hole (2 MiB, 5 MiB, 20 MiB) needs a new segment.
  DataPtr big = a.allocate(21 * MiB);
  CHECK(device_mallocs(api) == 3);
  release(big);
  release(six2);
  release(bs[1]);
  release(bs[2]);
  auto segs = a.snapshot();
  for (const auto& seg : segs) CHECK(seg.blocks.size() == 1);
  check_invariants(a, api);
  a.empty_cache();
  CHECK(api.used() == 0);
}

TEST_CASE("the allocator is thread-safe") {
  FakeDeviceApi api(size_t{4} << 30);
  CachingAllocator a(&api);
  constexpr int kThreads = 4, kSteps = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&a, t] {
      std::mt19937_64 rng(1234 + t);
      std::vector<DataPtr> live;
      StreamId stream = static_cast<StreamId>(t % 2);  // two threads share each stream
      for (int i = 0; i < kSteps; ++i) {
        bool do_alloc = live.empty() || (live.size() < 32 && rng() % 2 == 0);
        if (do_alloc) {
          size_t n = size_t{1} << (rng() % 22);  // 1 B .. 2 MiB
          n += rng() % n;
          live.push_back(a.allocate(n, stream));
        } else {
          size_t k = rng() % live.size();
          release(live[k]);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (const DataPtr& p : live) release(p);
    });
  for (auto& th : threads) th.join();
  MemoryStats s = a.stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.num_allocs == s.num_frees);
  CHECK(s.num_allocs >= kThreads * kSteps / 2);
  CHECK(s.num_ooms == 0);
  check_invariants(a, api);
  a.empty_cache();
  CHECK(api.used() == 0);
  CHECK(a.stats().reserved_bytes == 0);
}

TEST_CASE("20k random allocations and frees of 1 B to 4 MiB leave nothing behind") {
  FakeDeviceApi api(size_t{2} << 30);
  CachingAllocator a(&api);
  std::mt19937_64 rng(42);
  std::vector<DataPtr> live;
  int64_t allocs = 0;
  for (int i = 0; i < 20000; ++i) {
    if (live.empty() || (live.size() < 64 && rng() % 2 == 0)) {
      // Log-uniform over 1 B .. 4 MiB, so both pools and every split rule get exercised.
      size_t n = size_t{1} << (rng() % 23);
      n = std::min(n + rng() % n, 4 * MiB);
      StreamId stream = rng() % 3;
      live.push_back(a.allocate(n, stream));
      allocs++;
      if (rng() % 8 == 0) a.record_stream(live.back().ptr, 3 + rng() % 2);
    } else {
      size_t k = rng() % live.size();
      release(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (rng() % 16 == 0) api.complete_stream(3 + rng() % 2);
    if (i % 1000 == 999) check_invariants(a, api);
    if (i % 5000 == 4999) a.empty_cache();
  }
  for (const DataPtr& p : live) release(p);
  MemoryStats s = a.stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.num_allocs == allocs);
  CHECK(s.num_frees == allocs);
  CHECK(a.detailed_stats().requested_bytes == 0);
  check_invariants(a, api);
  a.empty_cache();
  CHECK(a.stats().reserved_bytes == 0);
  CHECK(a.stats().num_segments == 0);
  CHECK(api.used() == 0);
  CHECK(api.live_segments() == 0);
  CHECK(api.live_events() == 0);
  CHECK(api.bad_frees == 0);
}

TEST_CASE("destroying the allocator returns its cached segments") {
  FakeDeviceApi api(64 * MiB);
  {
    CachingAllocator a(&api);
    release(a.allocate(KiB));
    release(a.allocate(5 * MiB));
    DataPtr p = a.allocate(KiB);
    a.record_stream(p.ptr, 2);
    release(p);  // pending: its event is released by the destructor
    CHECK(api.used() == 22 * MiB);
  }
  CHECK(api.used() == 0);
  CHECK(api.live_events() == 0);
}

namespace {

Tensor fake_cuda_empty(const Shape& sizes, DType dtype, Device device, bool pinned) {
  return kernels::new_tensor(sizes, dtype, device, pinned);
}

// Installs `alloc` for DeviceType::CUDA and an allocation-only "empty" kernel for CUDA (the fake
// device has no kernels), restoring both on exit even when a check throws.
class InstallForCuda {
 public:
  explicit InstallForCuda(Allocator* alloc)
      : prev_alloc_(set_allocator(DeviceType::CUDA, alloc)),
        prev_empty_(op_handle("empty").kernels[static_cast<int>(DeviceType::CUDA)]) {
    register_kernel("empty", DeviceType::CUDA, &boxed<&fake_cuda_empty>);
  }
  ~InstallForCuda() {
    register_kernel("empty", DeviceType::CUDA, prev_empty_);
    set_allocator(DeviceType::CUDA, prev_alloc_);
  }

 private:
  Allocator* prev_alloc_;
  BoxedKernel prev_empty_;
};

}  // namespace

TEST_CASE("graft tensors on cuda allocate and free through the installed caching allocator") {
  FakeDeviceApi api(64 * MiB);
  CachingAllocator a(&api);
  Allocator* before = set_allocator(DeviceType::CUDA, nullptr);
  set_allocator(DeviceType::CUDA, before);
  {
    InstallForCuda install(&a);
    {
      Tensor t = graft::empty({1000}, graft::device(kCUDA));  // 4000 bytes -> 4096
      CHECK(t.device() == Device("cuda:0"));
      CHECK(t.data_ptr() != nullptr);
      MemoryStats s = memory_stats(kCUDA);
      CHECK(s.allocated_bytes == 4096);
      CHECK(s.num_allocs == 1);
      CHECK(s.reserved_bytes == int64_t(2 * MiB));
      Tensor v = t.view({10, 100});  // a view allocates nothing
      Tensor u = kernels::new_tensor({3, MiB}, kFloat32, Device("cuda:0"));  // 12 MiB, large pool
      CHECK(a.detailed_stats().large_pool.num_segments == 1);
      CHECK(memory_stats(kCUDA).allocated_bytes == int64_t(4096 + 12 * MiB));
      CHECK(memory_stats(kCUDA).num_allocs == 2);
      CHECK(device_mallocs(api) == 2);
    }
    MemoryStats s = memory_stats(kCUDA);
    CHECK(s.allocated_bytes == 0);
    CHECK(s.num_frees == 2);
    CHECK(s.reserved_bytes == int64_t(14 * MiB));
    {
      Tensor again = graft::empty({500}, graft::device(kCUDA));
      CHECK(device_mallocs(api) == 2);  // served from the cache
    }
    empty_cache(kCUDA);
    CHECK(memory_stats(kCUDA).reserved_bytes == 0);
    CHECK(api.used() == 0);
  }
  Allocator* now = set_allocator(DeviceType::CUDA, before);
  CHECK(now == before);
  CHECK(op_handle("empty").kernels[static_cast<int>(DeviceType::CUDA)] != &boxed<&fake_cuda_empty>);
}
