// SaveOnDisk (API.md "Memory budget"): saved tensors go to files in a private directory and come
// back for backward; gradients are bit-identical to plain; nothing stays on disk after backward,
// after an exception, or once a retain_graph graph is dropped; failures are clear errors.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "graft.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::autograd;
namespace fs = std::filesystem;

namespace {

using graft::test::TempDir;

struct Net {
  Tensor w1, w2;
  Net() {
    manual_seed(7);
    w1 = randn({32, 48}).requires_grad_();
    w2 = randn({48, 16}).requires_grad_();
  }
  Tensor loss(const Tensor& x) const { return (tanh(mm(tanh(mm(x, w1)), w2)) * 2.0).sum(); }
  std::vector<Tensor> grads(const Tensor& x) {
    w1.mutable_grad() = Tensor();
    w2.mutable_grad() = Tensor();
    loss(x).backward();
    return {w1.grad(), w2.grad()};
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<float>() == b.to_vector<float>();
}

Tensor input() {
  manual_seed(3);
  return randn({64, 32});
}

// Injects failures into SaveOnDisk's file I/O for the lifetime of the object.
struct FaultyIo : autograd::detail::DiskIo {
  enum Mode { ShortWrite, FullDisk, ShortRead } mode;
  autograd::detail::DiskIo* previous;
  explicit FaultyIo(Mode m) : mode(m), previous(autograd::detail::set_disk_io(this)) {}
  ~FaultyIo() override { autograd::detail::set_disk_io(previous); }
  ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) override {
    if (mode == ShortWrite) return off == 0 ? DiskIo::pwrite(fd, buf, n / 2, off) : 0;
    if (mode == FullDisk) {
      errno = ENOSPC;
      return -1;
    }
    return DiskIo::pwrite(fd, buf, n, off);
  }
  ssize_t pread(int fd, void* buf, size_t n, off_t off) override {
    if (mode == ShortRead) return off == 0 ? DiskIo::pread(fd, buf, n / 2, off) : 0;
    return DiskIo::pread(fd, buf, n, off);
  }
};

}  // namespace

TEST_CASE("SaveOnDisk gives gradients bit-identical to plain and removes its files after backward") {
  TempDir dir;
  Net net;
  Tensor x = input();
  auto plain = net.grads(x);
  net.w1.mutable_grad() = Tensor();
  net.w2.mutable_grad() = Tensor();
  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), /*min_bytes=*/0);
    loss = net.loss(x);
  }
  // mm saves x and w1, tanh its output, ...: each went to a file in one private directory.
  CHECK(dir.entries() > 4);
  loss.backward();
  loss = Tensor();
  CHECK(dir.entries() == 0);
  CHECK(same_bits(net.w1.grad(), plain[0]));
  CHECK(same_bits(net.w2.grad(), plain[1]));
}

TEST_CASE("SaveOnDisk keeps tensors below min_bytes in memory") {
  TempDir dir;
  Net net;
  Tensor x = input();  // 64x32 floats = 8 KiB; every saved tensor is below 1 MiB
  Tensor loss;
  {
    SaveOnDisk disk(dir.path());
    loss = net.loss(x);
    CHECK(dir.entries() == 1);  // the private directory, empty
  }
  CHECK(dir.entries() == 0);  // no entry keeps it: gone with the scope
  loss.backward();
  loss = Tensor();
  CHECK(dir.entries() == 0);
}

TEST_CASE("SaveOnDisk leaves nothing behind when the graph is dropped unused or backward throws") {
  TempDir dir;
  Net net;
  Tensor x = input();
  {
    SaveOnDisk disk(dir.path(), 0);
    Tensor loss = net.loss(x);
    CHECK(dir.entries() > 4);
  }  // an exception before backward unwinds the same way: the graph dies with its files
  CHECK(dir.entries() == 0);

  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), 0);
    loss = net.loss(x);
  }
  auto h = net.w1.register_hook([](const Tensor&) -> Tensor { throw Error("hook failed"); });
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("hook failed"));
  h.remove();
  loss = Tensor();
  CHECK(dir.entries() == 0);
}

TEST_CASE("SaveOnDisk with retain_graph reads the files again and removes them with the graph") {
  TempDir dir;
  Net net;
  Tensor x = input();
  auto plain = net.grads(x);
  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), 0);
    loss = net.loss(x);
  }
  std::vector<Tensor> first = autograd::grad({loss}, {net.w1, net.w2}, {}, /*retain_graph=*/true);
  CHECK(dir.entries() > 4);
  std::vector<Tensor> second = autograd::grad({loss}, {net.w1, net.w2});
  CHECK(same_bits(first[0], plain[0]));
  CHECK(same_bits(second[0], plain[0]));
  CHECK(same_bits(second[1], plain[1]));
  loss = Tensor();
  CHECK(dir.entries() == 0);
}

TEST_CASE("SaveOnDisk is safe with two threads saving and running backward at once") {
  TempDir dir;
  Net net;
  Tensor x = input();
  auto plain = autograd::grad({net.loss(x)}, {net.w1, net.w2});
  std::vector<std::vector<Tensor>> got(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int rep = 0; rep < 5; ++rep) {
          Tensor loss;
          {
            SaveOnDisk disk(dir.path(), 0);
            loss = net.loss(x);
          }
          got[t] = autograd::grad({loss}, {net.w1, net.w2});
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    INFO(errors[t]);
    CHECK(errors[t].empty());
    REQUIRE(got[t].size() == 2);
    CHECK(same_bits(got[t][0], plain[0]));
    CHECK(same_bits(got[t][1], plain[1]));
  }
  CHECK(dir.entries() == 0);
}

TEST_CASE("SaveOnDisk names the directory when it cannot create its own in it") {
  TempDir dir;
  CHECK_THROWS_WITH(SaveOnDisk(dir.path() + "/missing"),
                    Catch::Contains("SaveOnDisk: cannot create a private directory in '" + dir.path() + "/missing'") &&
                        Catch::Contains("No such file or directory"));
  std::ofstream(dir.path() + "/file") << "x";
  CHECK_THROWS_WITH(SaveOnDisk(dir.path() + "/file"), Catch::Contains("Not a directory"));
  if (::geteuid() != 0) {  // root writes through permission bits; the two cases above cover it
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH(SaveOnDisk(dir.path()), Catch::Contains("Permission denied"));
    fs::permissions(dir.path(), fs::perms::owner_all);
  }
  // Nothing was pushed: saving now goes straight through.
  Tensor w = ones({3}).requires_grad_();
  (w * w).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
}

TEST_CASE("SaveOnDisk turns a short write or a full disk into an error naming the file and size") {
  TempDir dir;
  Net net;
  Tensor x = input();
  {
    FaultyIo io(FaultyIo::ShortWrite);
    SaveOnDisk disk(dir.path(), 0);
    // The first tensor saved (mm's input or weight) stops half way: its size and path are named.
    CHECK_THROWS_WITH(net.loss(x), Catch::Matches(".*SaveOnDisk: writing a saved tensor of (8192|6144) bytes to '" +
                                                  dir.path() + "/graft-saved-.*/t0\\.bin' failed after (4096|3072) "
                                                  "bytes: No space left on device.*"));
  }
  CHECK(dir.entries() == 0);  // the partial file and the directory are gone
  {
    FaultyIo io(FaultyIo::FullDisk);
    SaveOnDisk disk(dir.path(), 0);
    CHECK_THROWS_WITH(net.loss(x), Catch::Contains("failed after 0 bytes: No space left on device"));
  }
  CHECK(dir.entries() == 0);
  // State is intact: the same model trains through SaveOnDisk afterwards.
  auto plain = net.grads(x);
  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), 0);
    loss = net.loss(x);
  }
  auto again = autograd::grad({loss}, {net.w1, net.w2});
  CHECK(same_bits(again[0], plain[0]));
}

TEST_CASE("SaveOnDisk turns a short read into an error naming the file") {
  TempDir dir;
  Net net;
  Tensor x = input();
  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), 0);
    loss = net.loss(x);
  }
  {
    FaultyIo io(FaultyIo::ShortRead);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("SaveOnDisk: '" + dir.path()) &&
                                           Catch::Contains("(was the file truncated?)"));
  }
  loss = Tensor();
  CHECK(dir.entries() == 0);
}

TEST_CASE("SaveOnDisk keeps parameters (leaves that require grad) in memory: their module holds them") {
  TempDir dir;
  manual_seed(5);
  Tensor w = randn({64, 64}).requires_grad_();
  auto f = [&] {  // the graph below, in the same order, without hooks
    Tensor a = (w * w).sum();
    Tensor v = w * 2.0;
    return a + (v * v).sum();
  };
  Tensor plain = grad({f()}, {w})[0];
  Tensor loss;
  {
    SaveOnDisk disk(dir.path(), 0);
    loss = (w * w).sum();        // mul saves the leaf w twice: no file
    CHECK(dir.entries() == 1);   // the private directory, empty
    Tensor v = w * 2.0;
    loss = loss + (v * v).sum();  // v is an activation: written
    CHECK(dir.entries() > 1);
  }
  loss.backward();
  loss = Tensor();
  CHECK(dir.entries() == 0);
  CHECK(same_bits(w.grad(), plain));
}
