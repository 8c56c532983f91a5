// graft's side of the benchmark: each workload is timed after a warm-up and reported as
// `name value unit` (median of the repeats, with min and max). tools/bench/libtorch_reference.cpp
// runs the same workloads with the same shapes and names.
#include "tools/bench/graft_workloads.h"

#include <cmath>

#include "graft.h"
#include "nn/checkpoint_helpers.h"

namespace graft_bench {

using namespace graft;

namespace {

template <class F>
std::vector<double> time_ms(int repeat, int warmup, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  return t;
}

Tensor param(const Shape& shape, double scale) { return (randn(shape) * scale).requires_grad_(); }

struct Sgd {
  std::vector<Tensor> params, bufs;
  double lr, momentum;
  Sgd(std::vector<Tensor> p, double lr_, double m) : params(std::move(p)), lr(lr_), momentum(m) {
    for (auto& t : params) bufs.push_back(zeros_like(t));
  }
  void step() {
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      bufs[i].mul_(momentum).add_(params[i].grad());
      params[i].sub_(bufs[i], lr);
      params[i].mutable_grad() = Tensor();  // zero_grad(set_to_none=true)
    }
  }
};

struct Adam {
  std::vector<Tensor> params, m, v;
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int t = 0;
  Adam(std::vector<Tensor> p, double lr_) : params(std::move(p)), lr(lr_) {
    for (auto& x : params) {
      m.push_back(zeros_like(x));
      v.push_back(zeros_like(x));
    }
  }
  void step() {
    NoGradGuard ng;
    ++t;
    double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      m[i].mul_(b1).add_(g, 1 - b1);
      ops::addcmul_(v[i].mul_(b2), g, g, 1 - b2);
      Tensor denom = (v[i].sqrt() / std::sqrt(bc2)).add_(eps);
      ops::addcdiv_(params[i], m[i], denom, -lr / bc1);
      params[i].mutable_grad() = Tensor();
    }
  }
};

}  // namespace

std::vector<Figure> bench_engine(int repeat) {
  Tensor x = ones({4}).requires_grad_();
  auto t = time_ms(repeat, 2, [&] {
    Tensor y = x;
    for (int i = 0; i < 2000; ++i) y = y * 1.0001 + 0.0;  // 4000 recorded ops
    y.sum().backward();
  });
  for (auto& v : t) v = v * 1000.0 / 4000.0;
  return {summarize("engine_us_per_op", "us", t)};
}

std::vector<Figure> bench_mlp(int repeat) {
  manual_seed(0);
  Tensor w1 = param({512, 784}, 0.035), b1 = param({512}, 0.0), w2 = param({512, 512}, 0.044),
         b2 = param({512}, 0.0), w3 = param({10, 512}, 0.044), b3 = param({10}, 0.0);
  Sgd opt({w1, b1, w2, b2, w3, b3}, 0.01, 0.9);
  Tensor x = randn({128, 784}), y = randint(0, 10, {128});
  auto t = time_ms(repeat, 3, [&] {
    Tensor h = linear(x, w1, b1).relu();
    h = linear(h, w2, b2).relu();
    Tensor loss = cross_entropy(linear(h, w3, b3), y);
    loss.backward();
    opt.step();
  });
  return {summarize("mlp_step_ms", "ms", t)};
}

std::vector<Figure> bench_cnn(int repeat) {
  manual_seed(0);
  Tensor c1 = param({32, 1, 3, 3}, 0.33), cb1 = param({32}, 0.0), c2 = param({64, 32, 3, 3}, 0.059),
         cb2 = param({64}, 0.0), f1 = param({128, 3136}, 0.018), fb1 = param({128}, 0.0), f2 = param({10, 128}, 0.088),
         fb2 = param({10}, 0.0);
  Adam opt({c1, cb1, c2, cb2, f1, fb1, f2, fb2}, 1e-3);
  Tensor x = randn({64, 1, 28, 28}), y = randint(0, 10, {64});
  auto t = time_ms(repeat, 2, [&] {
    Tensor h = max_pool2d(conv2d(x, c1, cb1, {1, 1}, {1, 1}).relu(), {2, 2});
    h = max_pool2d(conv2d(h, c2, cb2, {1, 1}, {1, 1}).relu(), {2, 2});
    h = linear(h.flatten(1), f1, fb1).relu();
    Tensor loss = cross_entropy(linear(h, f2, fb2), y);
    loss.backward();
    opt.step();
  });
  return {summarize("cnn_step_ms", "ms", t)};
}

std::vector<Figure> bench_matmul(int repeat) {
  manual_seed(0);
  Tensor a = randn({1024, 1024}), b = randn({1024, 1024});
  auto t = time_ms(repeat, 2, [&] { Tensor c = a.matmul(b); });
  std::vector<double> gflops;
  for (double ms : t) gflops.push_back(2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
  return {summarize("matmul1024_gflops", "GFLOP/s", gflops)};
}

std::vector<Figure> bench_add(int repeat) {
  Tensor a = randn({1 << 24}), b = randn({1 << 24});
  auto t = time_ms(repeat, 2, [&] { Tensor c = a + b; });
  std::vector<double> gbps;
  for (double ms : t) gbps.push_back(3.0 * 4 * (1 << 24) / (ms * 1e6));
  return {summarize("elementwise_add_gbps", "GB/s", gbps)};
}

// 64 x (Linear 1024 + Tanh) at batch 256, plain, with sqrt(N) checkpointed segments, and with
// nested halving. held: bytes alive after forward; peak: the allocator's peak during the whole
// step (forward + backward), both above what existed before the step (weights and their grads).
std::vector<Figure> bench_deep_mlp(int repeat) {
  manual_seed(0);
  const int layers = 64, width = 1024, batch = 256;
  std::vector<Tensor> ws, bs;
  std::vector<nn::Layer> fns;
  for (int i = 0; i < layers; ++i) {
    ws.push_back(param({width, width}, 1.0 / std::sqrt(width)));
    bs.push_back(param({width}, 0.0));
    Tensor w = ws.back(), b = bs.back();
    fns.push_back([w, b](const Tensor& h) { return linear(h, w, b).tanh(); });
  }
  Tensor x = randn({batch, width});
  std::vector<Figure> out;
  const char* modes[] = {"", "_sqrt", "_nested"};
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> held, peak;
    auto t = time_ms(repeat, 1, [&] {
      int64_t before = memory_stats(kCPU).allocated_bytes;
      reset_peak_memory_stats(kCPU);
      Tensor h;
      if (mode == 0) {
        h = x;
        for (auto& f : fns) h = f(h);
      } else if (mode == 1) {
        h = nn::checkpoint_sequential(fns, 8, x);
      } else {
        h = nn::checkpoint_nested(fns, x);
      }
      Tensor loss = h.mean();
      held.push_back(static_cast<double>(memory_stats(kCPU).allocated_bytes - before) / (1 << 20));
      h = Tensor();
      loss.backward();
      peak.push_back(static_cast<double>(memory_stats(kCPU).peak_allocated_bytes - before) / (1 << 20));
      // zero_grad(set_to_none=false): the grads stay allocated and backward accumulates into them
      // in place, so the peak measures activations and temporaries, not 256 MiB of weight grads.
      NoGradGuard ng;
      for (int i = 0; i < layers; ++i) {
        ws[i].mutable_grad().zero_();
        bs[i].mutable_grad().zero_();
      }
    });
    held.erase(held.begin());  // the warm-up step
    peak.erase(peak.begin());
    std::string m = modes[mode];
    out.push_back(summarize("deep_mlp" + m + "_held_mib", "MiB", held));
    out.push_back(summarize("deep_mlp" + m + "_peak_mib", "MiB", peak));
    out.push_back(summarize("deep_mlp" + m + "_step_ms", "ms", t));
  }
  return out;
}

// One epoch of `graft train`'s default recipe (MLP 784-256-10, Adam 1e-3, cosine schedule, batch
// 128, shuffled) over 60000 synthetic images shaped like Fashion-MNIST: the epoch time of the
// README's training table without needing the data set installed.
std::vector<Figure> bench_train_epoch(int repeat) {
  manual_seed(0);
  Tensor images = rand({60000, 1, 28, 28}), labels = randint(0, 10, {60000});
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Flatten>());
  model.push_back(std::make_shared<nn::Linear>(784, 256));
  model.push_back(std::make_shared<nn::ReLU>());
  model.push_back(std::make_shared<nn::Linear>(256, 10));
  optim::Adam opt(model.parameters(), 1e-3);
  data::DataLoader loader(images, labels, 128, /*shuffle=*/true, /*drop_last=*/false, 0);
  optim::CosineAnnealingLR sched(opt, 2 * loader.num_batches());
  int64_t epoch = 0;
  auto t = time_ms(repeat, 1, [&] {
    loader.set_epoch(epoch++);
    while (auto b = loader.next()) {
      Tensor loss = cross_entropy(model.forward((b->images - 0.2860) * (1.0 / 0.3530)), b->labels);
      opt.zero_grad();
      loss.backward();
      opt.step();
      sched.step();
    }
  });
  std::vector<double> s;
  for (double ms : t) s.push_back(ms / 1000.0);
  return {summarize("train_mlp_epoch_s", "s", s)};
}

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"engine", bench_engine, 10},          {"mlp", bench_mlp, 10},     {"cnn", bench_cnn, 5},
      {"matmul1024", bench_matmul, 10},      {"elementwise_add", bench_add, 10},
      {"deep_mlp", bench_deep_mlp, 3},       {"train_epoch", bench_train_epoch, 3},
  };
  return w;
}

}  // namespace graft_bench
