// The autograd graph features on CUDA tensors: SaveOnCpu with pinned memory, checkpointing (with
// RNG replay), mixed-device errors, the allocator's statistics and empty_cache, and `graft train
// --device cuda` end to end. Needs a GPU: linked with tests/support/gpu_main.cpp, which exits with
// 77 (meson's SKIPPED) without one.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "graft.h"
#include "support/fixtures.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::autograd;
using Catch::Matchers::Contains;

namespace {

const TensorOptions kOnCuda = TensorOptions{}.device(kCUDA);

std::vector<float> host(const Tensor& t) { return t.cpu().contiguous().to_vector<float>(); }

// Sees every device transfer (`_to_copy` out of a device, `copy_` across devices) and keeps its
// source and destination.
class CopyRecorder final : public DispatchMode {
 public:
  struct Copy {
    Tensor src, dst;
    bool non_blocking;
  };
  std::vector<Copy> copies;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    const std::string name = op.schema.full_name();
    Tensor src, dst;
    bool nb = false;
    if (name == "copy_") {
      dst = std::get<Tensor>(args[0]);
      src = std::get<Tensor>(args[1]);
      nb = std::get<bool>(args[2]);
    } else if (name == "_to_copy") {
      src = std::get<Tensor>(args[0]);
      nb = std::get<bool>(args[3]);
    }
    OpResult out = next(args);
    if (name == "_to_copy") dst = out[0];
    if (src.defined() && dst.defined() && src.device() != dst.device()) copies.push_back({src, dst, nb});
    return out;
  }
};

struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(Device d) {
    manual_seed(17);
    auto o = TensorOptions{}.device(d);
    w1 = (randn({256, 784}, o) * 0.05).requires_grad_();
    b1 = zeros({256}, o).requires_grad_();
    w2 = (randn({10, 256}, o) * 0.05).requires_grad_();
    b2 = zeros({10}, o).requires_grad_();
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = linear(x, w1, b1).relu();
    return cross_entropy(linear(h, w2, b2).log_softmax(1).exp().log(), y);  // several saved outputs
  }
};

std::vector<std::vector<float>> grads_of(const std::vector<Tensor>& ps) {
  std::vector<std::vector<float>> g;
  for (const auto& p : ps) g.push_back(host(p.grad()));
  return g;
}

// The per-step losses of a --metrics CSV (kind,epoch,step,loss,...).
std::vector<double> step_losses(const std::string& csv) {
  std::istringstream f(graft::test::read_file(csv));
  std::string line;
  std::vector<double> out;
  while (std::getline(f, line)) {
    if (line.rfind("step,", 0) != 0) continue;
    std::stringstream s(line);
    std::string field;
    for (int i = 0; i < 4 && std::getline(s, field, ','); ++i) {
    }
    out.push_back(std::stod(field));
  }
  return out;
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / static_cast<double>(to - from);
}

}  // namespace

TEST_CASE("SaveOnCpu(pin_memory) keeps pinned host copies of saved CUDA tensors and gives identical gradients") {
  Mlp m(kCUDA);
  manual_seed(3);
  Tensor x = randn({64, 784}, kOnCuda), y = randint(0, 10, {64}, kOnCuda);

  m.loss(x, y).backward();
  auto plain = grads_of(m.params());
  for (auto p : m.params()) p.mutable_grad() = Tensor();

  CopyRecorder rec;
  Tensor loss;
  {
    DispatchModeGuard guard(&rec);
    SaveOnCpu save(/*pin_memory=*/true);
    loss = m.loss(x, y);
  }
  size_t packed = rec.copies.size();
  REQUIRE(packed > 0);
  for (const auto& c : rec.copies) {
    CHECK(c.src.is_cuda());
    CHECK(c.dst.is_cpu());
    CHECK(c.dst.is_pinned());
  }
  {
    DispatchModeGuard guard(&rec);
    loss.backward();
  }
  // Saved tensors come back to the GPU with asynchronous copies from pinned memory (a tensor whose
  // node needs it for no requested gradient may stay on the host).
  REQUIRE(rec.copies.size() > packed);
  for (size_t i = packed; i < rec.copies.size(); ++i) {
    CHECK(rec.copies[i].src.is_pinned());
    CHECK(rec.copies[i].dst.is_cuda());
    CHECK(rec.copies[i].non_blocking);
  }
  CHECK(grads_of(m.params()) == plain);
  for (auto p : m.params()) CHECK(p.grad().is_cuda());
}

TEST_CASE("SaveOnCpu without pinning copies synchronously into pageable memory") {
  Mlp m(kCUDA);
  Tensor x = randn({8, 784}, kOnCuda), y = randint(0, 10, {8}, kOnCuda);
  CopyRecorder rec;
  Tensor loss;
  {
    DispatchModeGuard guard(&rec);
    SaveOnCpu save(/*pin_memory=*/false);
    loss = m.loss(x, y);
    loss.backward();
  }
  REQUIRE(!rec.copies.empty());
  for (const auto& c : rec.copies)
    if (c.dst.is_cpu()) CHECK(!c.dst.is_pinned());
}

TEST_CASE("checkpoint on CUDA gives bit-identical gradients, dropout included") {
  manual_seed(5);
  Tensor w1 = (randn({512, 512}, kOnCuda) * 0.04).requires_grad_(), w2 = (randn({512, 512}, kOnCuda) * 0.04).requires_grad_();
  Tensor x = randn({128, 512}, kOnCuda).requires_grad_();
  // Draws from the CUDA generator: recomputation must replay the same mask.
  auto block = [&](const Tensor& h) {
    Tensor a = nn::functional::dropout(linear(h, w1).tanh(), 0.3, true);
    return nn::functional::dropout(linear(a, w2).gelu(), 0.1, true) + h;
  };
  auto run_once = [&](int mode, int64_t* held) {
    for (Tensor* t : {&w1, &w2, &x}) t->mutable_grad() = Tensor();
    manual_seed(42);
    int64_t before = memory_stats(kCUDA).allocated_bytes;
    Tensor y;
    if (mode == 0) y = block(block(x));
    else if (mode == 1) y = checkpoint(block, checkpoint(block, x));
    else y = nn::checkpoint_nested({block, block, block, block}, x);
    if (held) *held = memory_stats(kCUDA).allocated_bytes - before;
    (y * y).mean().backward();
    std::vector<std::vector<float>> r = {host(y), host(w1.grad()), host(w2.grad()), host(x.grad())};
    return r;
  };
  int64_t held_plain = 0, held_ckpt = 0;
  auto plain = run_once(0, &held_plain);
  auto ckpt = run_once(1, &held_ckpt);
  CHECK(ckpt[0] == plain[0]);
  CHECK(ckpt[1] == plain[1]);
  CHECK(ckpt[2] == plain[2]);
  CHECK(ckpt[3] == plain[3]);
  // Checkpointed blocks keep only their inputs; the plain run keeps every activation and mask.
  CHECK(held_ckpt < held_plain);
  // Nested checkpoints over four blocks against the same four blocks run plainly.
  auto plain4 = [&] {
    for (Tensor* t : {&w1, &w2, &x}) t->mutable_grad() = Tensor();
    manual_seed(42);
    Tensor y = block(block(block(block(x))));
    (y * y).mean().backward();
    return std::vector<std::vector<float>>{host(y), host(w1.grad()), host(w2.grad()), host(x.grad())};
  }();
  auto nested = run_once(2, nullptr);
  CHECK(nested == plain4);
}

TEST_CASE("checkpoint_sequential on CUDA matches the plain run and recomputes again with retain_graph") {
  manual_seed(8);
  std::vector<Tensor> ws;
  std::vector<nn::Layer> layers;
  for (int i = 0; i < 9; ++i) {
    ws.push_back((randn({256, 256}, kOnCuda) * 0.06).requires_grad_());
    Tensor w = ws.back();
    layers.push_back([w](const Tensor& h) { return nn::functional::dropout(linear(h, w).tanh(), 0.2, true); });
  }
  Tensor x = randn({32, 256}, kOnCuda);
  auto grads = [&](bool ckpt) {
    for (auto& w : ws) w.mutable_grad() = Tensor();
    manual_seed(1);
    Tensor h = x;
    if (ckpt) h = nn::checkpoint_sequential(layers, 3, x);
    else
      for (auto& l : layers) h = l(h);
    Tensor loss = h.sum();
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();  // a second pass recomputes the checkpoints again and accumulates
    return grads_of(ws);
  };
  CHECK(grads(true) == grads(false));
}

TEST_CASE("mixing CPU and CUDA tensors is a graft::Error naming both devices") {
  Tensor g = randn({4, 4}, kOnCuda), c = randn({4, 4});
  auto names_both = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      std::string w = e.what();
      INFO(w);
      CHECK(w.find("cuda:0") != std::string::npos);
      CHECK(w.find("cpu") != std::string::npos);
      return true;
    }
    return false;
  };
  CHECK(names_both([&] { (void)(g + c); }));
  CHECK(names_both([&] { (void)(c * g); }));
  CHECK(names_both([&] { (void)g.matmul(c); }));
  CHECK(names_both([&] { (void)cat({g, c}); }));
  CHECK(names_both([&] { (void)linear(g, c); }));
  CHECK(names_both([&] { (void)index_select(g, 0, tensor(std::vector<int64_t>{0, 2}, {2})); }));
  CHECK(names_both([&] { (void)cross_entropy(g, randint(0, 4, {4})); }));
  CHECK(names_both([&] { (void)conv2d(randn({1, 1, 5, 5}, kOnCuda), randn({2, 1, 3, 3})); }));
  CHECK(names_both([&] { g.add_(c); }));
  CHECK(names_both([&] {
    Tensor w = randn({4, 4}, kOnCuda).requires_grad_();
    (w * 2.0).backward(ones({4, 4}));  // a CPU gradient for a CUDA output
  }));
  // Transfers are not mixing: copy_ and to() cross devices by design.
  Tensor dst = zeros({4, 4}, kOnCuda);
  dst.copy_(c);
  CHECK(host(dst) == c.to_vector<float>());
  CHECK(host(c.to(kCUDA) + g) == host(g + c.cuda()));
}

TEST_CASE("memory_stats(kCUDA) follows allocations and empty_cache returns the cached segments") {
  empty_cache(kCUDA);
  MemoryStats s0 = memory_stats(kCUDA);
  const int64_t n = 16 << 20;  // 64 MiB of float32
  Tensor t = empty({n}, kOnCuda);
  MemoryStats s1 = memory_stats(kCUDA);
  CHECK(s1.allocated_bytes - s0.allocated_bytes >= n * 4);
  CHECK(s1.allocated_bytes - s0.allocated_bytes < n * 4 + (2 << 20));
  CHECK(s1.reserved_bytes >= s1.allocated_bytes);
  CHECK(s1.peak_allocated_bytes >= s1.allocated_bytes);
  CHECK(s1.num_allocs == s0.num_allocs + 1);
  CHECK(s1.num_segments >= s0.num_segments + 1);
  t = Tensor();
  MemoryStats s2 = memory_stats(kCUDA);
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(s2.num_frees == s0.num_frees + 1);
  CHECK(s2.reserved_bytes == s1.reserved_bytes);  // cached, not returned
  CHECK(s2.peak_allocated_bytes == s1.peak_allocated_bytes);
  // Reuse: the same request is served from the cache without reserving more.
  Tensor again = empty({n}, kOnCuda);
  CHECK(memory_stats(kCUDA).reserved_bytes == s1.reserved_bytes);
  again = Tensor();
  empty_cache(kCUDA);
  MemoryStats s3 = memory_stats(kCUDA);
  CHECK(s3.reserved_bytes <= s2.reserved_bytes - n * 4);
  CHECK(s3.allocated_bytes == s0.allocated_bytes);
  reset_peak_memory_stats(kCUDA);
  CHECK(memory_stats(kCUDA).peak_allocated_bytes == s3.allocated_bytes);
  // The CPU's statistics are separate.
  int64_t cpu_before = memory_stats(kCPU).allocated_bytes;
  Tensor big = empty({n}, kOnCuda);
  CHECK(memory_stats(kCPU).allocated_bytes == cpu_before);
}

TEST_CASE("graft train --device cuda runs 200 steps and the loss goes down") {
  graft::test::TempDir dir("cuda_train");
  const std::string d = dir.path();
  const int batch = 32, steps = 200;  // no --steps flag: one epoch of 200 batches
  // Noisier than the CPU smoke test's, classes interleaved: learnable, but not in a few steps.
  auto label = [](int i) { return (i * 7 + i / 10) % 10; };
  graft::test::write_square_data_set(d, steps * batch, 500, 40, label);
  struct Recipe {
    std::string flags, label;
  };
  for (const Recipe& r : {Recipe{"--model mlp --optimizer sgd --lr 0.02", "mlp sgd"},
                          Recipe{"--model cnn --checkpoint sqrt --save-on-cpu", "cnn adam, checkpointed, save-on-cpu"}}) {
    INFO(r.label);
    auto train = graft::test::run_graft("train --device cuda --data " + d + " --epochs 1 --batch-size " +
                                            std::to_string(batch) + " " + r.flags + " --metrics " + d + "/m.csv",
                                        {.merge_stderr = true});
    const std::string& out = train.out;
    INFO(out);
    REQUIRE(train.exit_code == 0);
    CHECK(out.find("device cuda:0") != std::string::npos);
    CHECK(out.find("MiB on cuda:0") != std::string::npos);
    auto losses = step_losses(d + "/m.csv");
    REQUIRE(losses.size() == static_cast<size_t>(steps));
    double first = mean(losses, 0, 20), last = mean(losses, steps - 20, steps);
    INFO("mean loss of the first 20 steps " << first << ", of the last 20 " << last);
    CHECK(last < 0.5 * first);
    std::string acc = out.substr(out.find("test accuracy") + 14);
    CHECK(std::stod(acc) > 50.0);
  }
}
