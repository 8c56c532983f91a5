#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "graft.h"

using namespace graft;

TEST_CASE("allocated bytes count exactly the live tensors' storages") {
  MemoryStats before = memory_stats(kCPU);
  {
    Tensor a = ops::empty({256}, kFloat32);   // 1024 bytes
    Tensor b = ops::empty({10}, kFloat64);    // 80 bytes
    MemoryStats during = memory_stats(kCPU);
    CHECK(during.allocated_bytes - before.allocated_bytes == 1024 + 80);
    CHECK(during.num_allocs - before.num_allocs == 2);
  }
  MemoryStats after = memory_stats(kCPU);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.num_frees - before.num_frees == 2);
}

TEST_CASE("a view allocates nothing") {
  Tensor x = ops::zeros({64, 64});
  MemoryStats before = memory_stats(kCPU);
  Tensor v = x.t().slice(0, 0, 32).view({32, 32, 2}).unsqueeze(0).expand({3, -1, -1, 2});
  Tensor d = x.detach();
  MemoryStats after = memory_stats(kCPU);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.num_allocs == before.num_allocs);
  (void)v;
  (void)d;
}

TEST_CASE("storage memory is 64-byte aligned") {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = ops::empty({n}, kFloat32);
    CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
  }
}

TEST_CASE("peak tracks the high-water mark and resets to the current level") {
  reset_peak_memory_stats(kCPU);
  int64_t base = memory_stats(kCPU).allocated_bytes;
  {
    Tensor big = ops::empty({1 << 20}, kFloat32);  // 4 MiB
    (void)big;
  }
  MemoryStats s = memory_stats(kCPU);
  CHECK(s.peak_allocated_bytes >= base + (4 << 20));
  CHECK(s.allocated_bytes == base);
  reset_peak_memory_stats(kCPU);
  CHECK(memory_stats(kCPU).peak_allocated_bytes == base);
  empty_cache(kCPU);
}

TEST_CASE("freed blocks of 2 MiB and more are reused by size; reserved counts them until empty_cache") {
  empty_cache(kCPU);
  MemoryStats s0 = memory_stats(kCPU);
  CHECK(s0.reserved_bytes == s0.allocated_bytes);
  void* first = nullptr;
  {
    Tensor big = ops::empty({3 << 20}, kFloat32);  // 12 MiB: a 14 MiB huge-page block with its header
    first = big.data_ptr();
    CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
  }
  MemoryStats s1 = memory_stats(kCPU);
  CHECK(s1.allocated_bytes == s0.allocated_bytes);  // allocated is exact either way
#if defined(__SANITIZE_ADDRESS__)
  // Nothing is kept under AddressSanitizer: a use after free must still reach it.
  CHECK(s1.reserved_bytes == s1.allocated_bytes);
#else
  CHECK(s1.reserved_bytes == s1.allocated_bytes + (14 << 20));
  {
    Tensor again = ops::empty({3 << 20}, kFloat32);
    CHECK(again.data_ptr() == first);  // the same block back: no fresh page faults
    CHECK(memory_stats(kCPU).reserved_bytes == memory_stats(kCPU).allocated_bytes);
    Tensor other = ops::empty({5 << 20}, kFloat32);  // another size class: a new block
    CHECK(other.data_ptr() != first);
  }
  CHECK(memory_stats(kCPU).reserved_bytes > memory_stats(kCPU).allocated_bytes);
  empty_cache(kCPU);
  MemoryStats s2 = memory_stats(kCPU);
  CHECK(s2.reserved_bytes == s2.allocated_bytes);
#endif
}

TEST_CASE("freed blocks of 256 KiB to 2 MiB are reused by page-rounded size") {
  empty_cache(kCPU);
  MemoryStats s0 = memory_stats(kCPU);
  void* first = nullptr;
  {
    Tensor mid = ops::empty({400 << 10}, kBFloat16);  // 800 KiB + the 64-byte header: 201 pages
    first = mid.data_ptr();
  }
  MemoryStats s1 = memory_stats(kCPU);
  CHECK(s1.allocated_bytes == s0.allocated_bytes);
#if defined(__SANITIZE_ADDRESS__)
  CHECK(s1.reserved_bytes == s1.allocated_bytes);
#else
  CHECK(s1.reserved_bytes == s1.allocated_bytes + 201 * 4096);
  {
    Tensor again = ops::empty({400 << 10}, kBFloat16);
    CHECK(again.data_ptr() == first);
  }
  empty_cache(kCPU);
  MemoryStats s2 = memory_stats(kCPU);
  CHECK(s2.reserved_bytes == s2.allocated_bytes);
#endif
}

TEST_CASE("small blocks are reused per thread; empty_cache returns this thread's") {
  empty_cache(kCPU);
  void* first = nullptr;
  {
    Tensor t = ops::empty({16}, kFloat32);  // 64 bytes plus the header: the second size class
    first = t.data_ptr();
  }
  MemoryStats s = memory_stats(kCPU);
#if defined(__SANITIZE_ADDRESS__)
  CHECK(s.reserved_bytes == s.allocated_bytes);
#else
  CHECK(s.reserved_bytes == s.allocated_bytes + 128);
  {
    Tensor again = ops::empty({10}, kFloat32);  // 40 bytes: the same class, the same block
    CHECK(again.data_ptr() == first);
    CHECK(reinterpret_cast<uintptr_t>(again.data_ptr()) % 64 == 0);
  }
  // A block freed on another thread joins that thread's lists and is freed when it exits.
  std::thread([] {
    Tensor t = ops::empty({16}, kFloat32);
    (void)t;
  }).join();
  empty_cache(kCPU);
  MemoryStats e = memory_stats(kCPU);
  CHECK(e.reserved_bytes == e.allocated_bytes);
#endif
}

TEST_CASE("the CPU allocator is thread-safe") {
  int64_t base = memory_stats(kCPU).allocated_bytes;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        Tensor x = ops::empty({i % 50 + 1}, kFloat32);
        (void)x;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(memory_stats(kCPU).allocated_bytes == base);
}

TEST_CASE("pinned host memory is an ordinary host allocation without a CUDA backend") {
  Tensor p = empty({8}, TensorOptions{}.pinned_memory());
  CHECK(p.is_pinned());
  CHECK(p.is_cpu());
  CHECK_FALSE(ops::empty({8}).is_pinned());
}

TEST_CASE("asking for a device without an allocator is a clear error") {
  if (cuda_is_available()) SUCCEED("a CUDA device exists; nothing to check");
  else CHECK_THROWS_WITH(memory_stats(Device("cuda:0")), Catch::Contains("no allocator for device cuda:0"));
}
