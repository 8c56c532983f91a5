// graft's side of the benchmark: each workload is timed after a warm-up and reported as
// `name value unit` (median of the repeats, with min and max). tools/bench/libtorch_reference.cpp
// runs the same CPU workloads with the same shapes and names, tools/bench/pytorch_reference.py the
// CUDA ones (`graft bench --device cuda`).
//
// On CUDA every timed region ends with a device synchronisation, so a figure is the time until the
// GPU has finished the work, not until the launches were queued. The CPU figures and their names
// are unchanged by the device option: compare.sh pairs them with libtorch's by name.
#include "tools/bench/graft_workloads.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <random>

#include "autograd/autocast.h"
#include "graft.h"
#if GRAFT_HAVE_DIST
#include "dist/ddp.h"
#endif
#include "graft_config.h"
#include "nn/checkpoint_helpers.h"
#if GRAFT_HAVE_CUDA
#include "cuda/bench_support.h"
#endif

namespace graft_bench {

using namespace graft;

namespace {

void sync(Device device) {
  if (device.is_cuda()) cuda_hooks().synchronize(device.index);
}

template <class F>
std::vector<double> time_ms(Device device, int repeat, int warmup, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  sync(device);
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    double t0 = now_ms();
    f();
    sync(device);
    t.push_back(now_ms() - t0);
  }
  return t;
}

Tensor param(const Shape& shape, double scale, Device device) {
  return (randn(shape, TensorOptions{}.device(device)) * scale).requires_grad_();
}

// The steps use each framework's library optimizer, as a user would: graft's optim::SGD/Adam (one
// fused kernel per parameter) here, torch::optim::SGD/Adam in the libtorch reference. Grads are
// set to none after each step (zero_grad(set_to_none=true)) on both sides.
struct Sgd {
  optim::SGD opt;
  Sgd(std::vector<Tensor> p, double lr, double momentum) : opt(std::move(p), lr, momentum) {}
  void step() {
    opt.step();
    opt.zero_grad(true);
  }
};

struct Adam {
  optim::Adam opt;
  Adam(std::vector<Tensor> p, double lr) : opt(std::move(p), lr) {}
  void step() {
    opt.step();
    opt.zero_grad(true);
  }
};

}  // namespace

std::vector<Figure> bench_engine(int repeat, Device device) {
  Tensor x = ones({4}, TensorOptions{}.device(device)).requires_grad_();
  auto t = time_ms(device, repeat, 2, [&] {
    Tensor y = x;
    for (int i = 0; i < 2000; ++i) y = y * 1.0001 + 0.0;  // 4000 recorded ops
    y.sum().backward();
  });
  for (auto& v : t) v = v * 1000.0 / 4000.0;
  // The same chain under anomaly mode (forward stacks recorded per node, errors annotated), without
  // and with the NaN check: what turning it on costs; off, it must cost nothing above.
  std::vector<Figure> out{summarize("engine_us_per_op", "us", t)};
  for (bool check_nan : {false, true}) {
    autograd::DetectAnomaly anomaly(check_nan);
    auto ta = time_ms(device, std::max(1, repeat / 2), 1, [&] {
      Tensor y = x;
      for (int i = 0; i < 2000; ++i) y = y * 1.0001 + 0.0;
      y.sum().backward();
    });
    for (auto& v : ta) v = v * 1000.0 / 4000.0;
    out.push_back(summarize(check_nan ? "engine_us_per_op_anomaly_nan" : "engine_us_per_op_anomaly", "us", ta));
  }
  return out;
}

// graft train's MLP (models::mlp: 784-256-10 with ReLU) on `device`.
std::shared_ptr<nn::Sequential> train_mlp(Device device) {
  auto model = models::mlp();
  model->to(device);
  return model;
}

// Evaluation of graft train's MLP over 10000 images in batches of 1000, under NoGradGuard and under
// InferenceMode (no autograd metadata, no version counters): what `graft eval` gains.
std::vector<Figure> bench_eval(int repeat, Device device) {
  manual_seed(0);
  Tensor images = rand({10000, 1, 28, 28}, TensorOptions{}.device(device));
  auto model_ptr = train_mlp(device);
  nn::Sequential& model = *model_ptr;
  model.eval();
  auto pass = [&] {
    for (int64_t i = 0; i < 10000; i += 1000) model(images.slice(0, i, i + 1000)).argmax(1);
  };
  for (int r = 0; r < 2; ++r) pass();  // warm up
  auto t_nograd = time_ms(device, repeat, 1, [&] {
    NoGradGuard ng;
    pass();
  });
  auto t_inf = time_ms(device, repeat, 1, [&] {
    InferenceMode im;
    pass();
  });
  return {summarize("eval_mlp_nograd_ms", "ms", t_nograd), summarize("eval_mlp_inference_ms", "ms", t_inf)};
}

// The forward and loss of a step under bf16 autocast when `bf16`, as torch.autocast("cpu", bfloat16).
struct MaybeBf16Autocast {
  std::optional<autocast::AutocastGuard> guard;
  MaybeBf16Autocast(bool bf16, Device device) {
    if (bf16) guard.emplace(device, kBFloat16);
  }
};

std::vector<Figure> bench_mlp_prec(int repeat, Device device, bool bf16) {
  manual_seed(0);
  Tensor w1 = param({512, 784}, 0.035, device), b1 = param({512}, 0.0, device), w2 = param({512, 512}, 0.044, device),
         b2 = param({512}, 0.0, device), w3 = param({10, 512}, 0.044, device), b3 = param({10}, 0.0, device);
  Sgd opt({w1, b1, w2, b2, w3, b3}, 0.01, 0.9);
  auto on = TensorOptions{}.device(device);
  Tensor x = randn({128, 784}, on), y = randint(0, 10, {128}, on);
  auto t = time_ms(device, repeat, 3, [&] {
    Tensor loss;
    {
      MaybeBf16Autocast mixed(bf16, device);
      Tensor h = linear(x, w1, b1).relu();
      h = linear(h, w2, b2).relu();
      loss = cross_entropy(linear(h, w3, b3), y);
    }
    loss.backward();
    opt.step();
  });
  return {summarize(bf16 ? "mlp_bf16_step_ms" : "mlp_step_ms", "ms", t)};
}
std::vector<Figure> bench_mlp(int repeat, Device device) { return bench_mlp_prec(repeat, device, false); }

// cnn_step_ms with NCHW tensors (what a user gets by default) and cnn_channels_last_step_ms with
// the model made channels-last once, outside the step (PyTorch's model.to(memory_format=
// channels_last) and input.contiguous(memory_format=channels_last); with one input channel the
// input already is, so the weights decide). Every activation after the first conv stays NHWC, so
// the convolutions run without activation reorders. The model is graft train's (models::cnn).
Figure bench_cnn_layout(int repeat, Device device, bool channels_last, bool bf16 = false) {
  manual_seed(0);
  auto model = models::cnn();
  model->to(device);
  if (channels_last) model->to(MemoryFormat::ChannelsLast);
  Adam opt(model->parameters(), 1e-3);
  auto on = TensorOptions{}.device(device);
  Tensor x = randn({64, 1, 28, 28}, on), y = randint(0, 10, {64}, on);
  if (channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
  auto t = time_ms(device, repeat, 2, [&] {
    Tensor loss;
    {
      MaybeBf16Autocast mixed(bf16, device);
      loss = cross_entropy((*model)(x), y);
    }
    loss.backward();
    opt.step();
  });
  if (bf16) return summarize("cnn_channels_last_bf16_step_ms", "ms", t);
  return summarize(channels_last ? "cnn_channels_last_step_ms" : "cnn_step_ms", "ms", t);
}

// The channels-last CNN step's peak memory above what was allocated before its forward (saved
// activations, gradients, the backward's transients), in float32 and under bf16 autocast.
std::vector<Figure> bench_cnn_peak(int, Device device) {
  std::vector<Figure> out;
  for (bool bf16 : {false, true}) {
    manual_seed(0);
    auto model = models::cnn();
    model->to(device);
    model->to(MemoryFormat::ChannelsLast);
    auto on = TensorOptions{}.device(device);
    Tensor x = randn({64, 1, 28, 28}, on).contiguous(MemoryFormat::ChannelsLast), y = randint(0, 10, {64}, on);
    for (int i = 0; i < 2; ++i) {  // the second step: weights' grads already allocated in the first
      model->zero_grad(true);
      sync(device);
      const int64_t base = memory_stats(device).allocated_bytes;
      reset_peak_memory_stats(device);
      Tensor loss;
      {
        MaybeBf16Autocast mixed(bf16, device);
        loss = cross_entropy((*model)(x), y);
      }
      loss.backward();
      sync(device);
      if (i == 1) {
        const double mib = static_cast<double>(memory_stats(device).peak_allocated_bytes - base) / (1 << 20);
        out.push_back(summarize(bf16 ? "cnn_channels_last_bf16_peak_mib" : "cnn_channels_last_peak_mib", "MiB", {mib}));
      }
    }
  }
  return out;
}

std::vector<Figure> bench_cnn(int repeat, Device device) {
  return {bench_cnn_layout(repeat, device, false), bench_cnn_layout(repeat, device, true)};
}
std::vector<Figure> bench_cnn_bf16(int repeat, Device device) { return {bench_cnn_layout(repeat, device, true, true)}; }

std::vector<Figure> bench_matmul(int repeat, Device device) {
  manual_seed(0);
  Tensor a = randn({1024, 1024}), b = randn({1024, 1024});
  auto t = time_ms(device, repeat, 2, [&] { Tensor c = a.matmul(b); });
  std::vector<double> gflops;
  for (double ms : t) gflops.push_back(2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
  return {summarize("matmul1024_gflops", "GFLOP/s", gflops)};
}

// matmul1024_bf16_gflops: the same product on bfloat16 operands (oneDNN's bf16 kernel with float
// accumulation where the CPU has one; graft's float path otherwise).
std::vector<Figure> bench_matmul_bf16(int repeat, Device device) {
  manual_seed(0);
  Tensor a = randn({1024, 1024}, dtype(kBFloat16)), b = randn({1024, 1024}, dtype(kBFloat16));
  auto t = time_ms(device, repeat, 2, [&] { Tensor c = a.matmul(b); });
  std::vector<double> gflops;
  for (double ms : t) gflops.push_back(2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
  return {summarize("matmul1024_bf16_gflops", "GFLOP/s", gflops)};
}

// The CNN's first max-pool (2x2, stride 2, [128, 32, 28, 28]) forward with its window offsets and
// the offsets' backward, NCHW and channels-last, float32 and bf16: the kernels behind the CNN
// steps' pooling rows of `--profile` (ops/pool.cpp: the flat 2x2 NCHW forward, the tiled NHWC
// backward).
std::vector<Figure> bench_max_pool2x2(int repeat, Device device) {
  std::vector<Figure> out;
  for (bool nhwc : {false, true})
    for (DType dt : {kFloat32, kBFloat16}) {
      manual_seed(0);
      Tensor x = randn({128, 32, 28, 28}, TensorOptions{}.device(device)).to(dt);
      if (nhwc) x = x.contiguous(MemoryFormat::ChannelsLast);
      std::vector<Tensor> r = ops::_max_pool2d_with_offsets(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
      Tensor g = randn(r[0].sizes(), TensorOptions{}.device(device)).to(dt);
      if (nhwc) g = g.contiguous(MemoryFormat::ChannelsLast);
      auto fwd = time_ms(device, repeat, 2, [&] { (void)ops::_max_pool2d_with_offsets(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false); });
      auto bwd = time_ms(device, repeat, 2, [&] {
        (void)ops::_max_pool2d_offsets_backward(g, r[1], x.sizes(), {2, 2}, {2, 2}, {0, 0}, {1, 1}, nhwc);
      });
      const std::string n = std::string("max_pool2x2_") + (nhwc ? "nhwc" : "nchw") + (dt == kBFloat16 ? "_bf16" : "");
      out.push_back(summarize(n + "_fwd_ms", "ms", fwd));
      out.push_back(summarize(n + "_bwd_ms", "ms", bwd));
    }
  return out;
}

// The ViT's patch embedding's weight gradient (conv2d_backward_weight of a [64, 1, 7, 7] stride-7
// convolution over 128 channels-last 28x28 images) in float32 and bf16: on AMX the bf16 one is a
// matrix product (ops/conv.cpp, patch_weight_grad), elsewhere oneDNN's kernel.
std::vector<Figure> bench_conv_patch_wgrad(int repeat, Device device) {
  std::vector<Figure> out;
  for (DType dt : {kFloat32, kBFloat16}) {
    manual_seed(0);
    auto on = TensorOptions{}.device(device);
    Tensor x = randn({128, 1, 28, 28}, on).to(dt).clone(MemoryFormat::ChannelsLast);
    Tensor g = randn({128, 64, 4, 4}, on).to(dt).contiguous(MemoryFormat::ChannelsLast);
    auto t = time_ms(device, repeat, 2, [&] {
      (void)ops::conv2d_backward_weight(g, x, {64, 1, 7, 7}, {7, 7}, {0, 0}, {1, 1}, 1);
    });
    out.push_back(summarize(dt == kBFloat16 ? "conv_patch_wgrad_bf16_ms" : "conv_patch_wgrad_ms", "ms", t));
  }
  return out;
}

// TF32 on or off for the scope (a no-op without the CUDA backend).
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) {
#if GRAFT_HAVE_CUDA
    prev_ = graft::cuda::bench::allow_tf32();
    graft::cuda::bench::set_allow_tf32(on);
#else
    (void)on;
#endif
  }
  ~Tf32Scope() {
#if GRAFT_HAVE_CUDA
    graft::cuda::bench::set_allow_tf32(prev_);
#endif
  }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool prev_ = false;
};

// CUDA only: 4096^3 float32 matmul with exact float32 and with TF32 tensor cores. Five products
// per sample keep launch and synchronisation overhead out of the figure.
std::vector<Figure> bench_matmul4096(int repeat, Device device) {
  manual_seed(0);
  auto on = TensorOptions{}.device(device);
  Tensor a = randn({4096, 4096}, on), b = randn({4096, 4096}, on);
  const int inner = 5;
  std::vector<Figure> out;
  for (bool tf32 : {false, true}) {
    Tf32Scope scope(tf32);
    auto t = time_ms(device, repeat, 2, [&] {
      for (int i = 0; i < inner; ++i) Tensor c = a.matmul(b);
    });
    std::vector<double> tflops;
    for (double ms : t) tflops.push_back(inner * 2.0 * 4096 * 4096 * 4096 / (ms * 1e9));
    out.push_back(summarize(tf32 ? "matmul4096_tf32_tflops" : "matmul4096_fp32_tflops", "TFLOP/s", tflops));
  }
  return out;
}

std::vector<Figure> bench_add(int repeat, Device device) {
  auto on = TensorOptions{}.device(device);
  Tensor a = randn({1 << 24}, on), b = randn({1 << 24}, on);
  // One GPU add of 16M floats takes tens of microseconds: time 20 of them per sample.
  const int inner = device.is_cuda() ? 20 : 1;
  auto t = time_ms(device, repeat, 2, [&] {
    for (int i = 0; i < inner; ++i) Tensor c = a + b;
  });
  std::vector<double> gbps;
  for (double ms : t) gbps.push_back(inner * 3.0 * 4 * (1 << 24) / (ms * 1e6));
  return {summarize("elementwise_add_gbps", "GB/s", gbps)};
}

// The machine's memory bandwidth, for compare.sh's roofline column: STREAM's triad
// a = b + s * c over three 64 MiB float arrays on all threads, in plain loops (no graft op), counting
// 12 bytes per element as STREAM does (and as elementwise_add_gbps does).
std::vector<Figure> bench_stream_triad(int repeat, Device) {
  const int64_t n = int64_t{1} << 24;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto triad = [&] {
    parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 0.5f * c[i];
    });
  };
  auto t = time_ms(Device(kCPU), repeat, 2, triad);
  std::vector<double> gbps;
  for (double ms : t) gbps.push_back(3.0 * 4 * static_cast<double>(n) / (ms * 1e6));
  return {summarize("stream_triad_gbps", "GB/s", gbps)};
}

// 64 x (Linear 1024 + Tanh) at batch 256, plain, with sqrt(N) checkpointed segments, and with
// nested halving. held: bytes alive after forward; peak: the allocator's peak during the whole
// step (forward + backward), both above what existed before the step (weights and their grads).
std::vector<Figure> bench_deep_mlp(int repeat, Device device) {
  manual_seed(0);
  const int layers = 64, width = 1024, batch = 256;
  std::vector<Tensor> ws, bs;
  std::vector<nn::Layer> fns;
  for (int i = 0; i < layers; ++i) {
    ws.push_back(param({width, width}, 1.0 / std::sqrt(width), device));
    bs.push_back(param({width}, 0.0, device));
    Tensor w = ws.back(), b = bs.back();
    fns.push_back([w, b](const Tensor& h) { return linear(h, w, b).tanh(); });
  }
  Tensor x = randn({batch, width}, TensorOptions{}.device(device));
  std::vector<Figure> out;
  const char* modes[] = {"", "_sqrt", "_nested"};
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> held, peak;
    auto t = time_ms(device, repeat, 1, [&] {
      int64_t before = memory_stats(device).allocated_bytes;
      reset_peak_memory_stats(device);
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
      held.push_back(static_cast<double>(memory_stats(device).allocated_bytes - before) / (1 << 20));
      h = Tensor();
      loss.backward();
      peak.push_back(static_cast<double>(memory_stats(device).peak_allocated_bytes - before) / (1 << 20));
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
// README's training table without needing the data set installed. Twice: zero_grad() setting the
// grads to none (PyTorch's default, what `graft train` does), then zero_grad(false) keeping them,
// which lets backward accumulate the weight gradients straight into .grad
// (AccumulateGrad::accumulate_directly) instead of allocating and adding a temporary.
// On CUDA the data set stays on the host and each batch is copied to the device, as `graft train
// --device cuda` does.
// `ddp`: the model runs inside dist::DistributedDataParallel at world size 1 (no launcher), the
// wrapper `graft train` uses under mpirun; train_epoch_ddp compares the two epochs.
// Seconds per epoch, one list per entry of set_to_none_modes, appended to per_mode.
void train_epoch_seconds(int repeat, Device device, bool ddp, const std::vector<bool>& set_to_none_modes,
                         std::vector<std::vector<double>>& per_mode) {
  manual_seed(0);
  Tensor images = rand({60000, 1, 28, 28}), labels = randint(0, 10, {60000});
  std::shared_ptr<nn::Module> model = train_mlp(device);
#if GRAFT_HAVE_DIST
  if (ddp) model = std::make_shared<dist::DistributedDataParallel>(model);
#else
  GRAFT_CHECK(!ddp, "bench: this graft was built without dist/");
#endif
  optim::Adam opt(model->parameters(), 1e-3);
  data::DataLoader loader(images, labels, 128, /*shuffle=*/true, /*drop_last=*/false, 0);
  optim::CosineAnnealingLR sched(opt, 2 * loader.num_batches());
  int64_t epoch = 0;
  for (bool set_to_none : set_to_none_modes) {
    auto t = time_ms(device, repeat, 1, [&] {
      loader.set_epoch(epoch++);
      while (auto b = loader.next()) {
        Tensor loss = cross_entropy(model->forward((b->images.to(device) - 0.2860) * (1.0 / 0.3530)), b->labels.to(device));
        opt.zero_grad(set_to_none);
        loss.backward();
        opt.step();
        sched.step();
      }
    });
    std::vector<double> s;
    for (double ms : t) s.push_back(ms / 1000.0);
    per_mode.push_back(s);
  }
}

std::vector<Figure> bench_train_epoch(int repeat, Device device) {
  std::vector<std::vector<double>> s;
  train_epoch_seconds(repeat, device, false, {true, false}, s);
  return {summarize("train_mlp_epoch_s", "s", s[0]), summarize("train_mlp_epoch_keep_grads_s", "s", s[1])};
}

// The same epoch through train::Trainer (the MLP recipe's defaults, no callbacks) on the same
// synthetic images: the second of two epochs, its steps' time as the Trainer measures it.
double trainer_epoch_seconds(Device device) {
  manual_seed(0);
  Tensor images = rand({60000, 1, 28, 28}), labels = randint(0, 10, {60000});
  train::Recipe recipe = train::Recipe::make({{"--epochs", "2"}, {"--device", device.str()}});
  data::DataLoader loader(images, labels, recipe.batch_size, /*shuffle=*/true, /*drop_last=*/false, recipe.seed);
  train::Trainer trainer(models::mlp(), loader, recipe);
  struct LastEpoch : train::TrainerCallback {
    double seconds = 0;
    void on_epoch_steps_end(train::TrainerState& s) override { seconds = s.epoch_seconds; }
  };
  auto last = std::make_shared<LastEpoch>();
  trainer.add_callback(last);
  trainer.fit();
  return last->seconds;
}

// train_mlp_epoch_s's loop by hand and through the Trainer, alternating so both see the same
// machine state: what the Trainer's loop (hooks, state, std::function inputs and loss) costs.
std::vector<Figure> bench_train_epoch_trainer(int repeat, Device device) {
  std::vector<double> hand, trainer;
  for (int r = 0; r < repeat; ++r) {
    std::vector<std::vector<double>> a;
    train_epoch_seconds(1, device, false, {true}, a);
    hand.push_back(a[0][0]);
    trainer.push_back(trainer_epoch_seconds(device));
  }
  return {summarize("train_mlp_epoch_hand_s", "s", hand), summarize("train_mlp_epoch_trainer_s", "s", trainer)};
}

#if GRAFT_HAVE_DIST
// The same epoch as train_mlp_epoch_s, bare and then wrapped in DistributedDataParallel at world
// size 1, alternating so both see the same machine state: the wrapper's own cost.
std::vector<Figure> bench_train_epoch_ddp(int repeat, Device device) {
  std::vector<double> bare, wrapped;
  for (int r = 0; r < repeat; ++r) {
    std::vector<std::vector<double>> a, b;
    train_epoch_seconds(1, device, false, {true}, a);
    train_epoch_seconds(1, device, true, {true}, b);
    bare.push_back(a[0][0]);
    wrapped.push_back(b[0][0]);
  }
  return {summarize("train_mlp_epoch_bare_s", "s", bare), summarize("train_mlp_epoch_ddp1_s", "s", wrapped)};
}
#endif


// scaled_dot_product_attention, forward + backward: q, k, v = randn [4, 4, L, 64] (batch 4, heads
// 4, head dim 64), no mask; out.backward(g) with a fixed g, grads set to none between iterations
// (outside the timed region), as libtorch_reference.cpp. At L = 1024 also the composed version
// (matmul, softmax, matmul) and both paths' peak bytes above the inputs: what the fused kernel saves.
std::vector<Figure> bench_sdpa(int L, bool causal, int repeat, Device device) {
  manual_seed(0);
  TensorOptions o = TensorOptions{}.device(device);
  Tensor q = randn({4, 4, L, 64}, o).requires_grad_(), k = randn({4, 4, L, 64}, o).requires_grad_(),
         v = randn({4, 4, L, 64}, o).requires_grad_();
  Tensor g = randn({4, 4, L, 64}, o);
  auto clear = [&] {
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
  };
  auto run = [&](SdpaBackend backend, int reps, const std::string& name) {
    SdpaBackendGuard guard(backend);
    std::vector<double> t;
    for (int i = 0; i < reps + 2; ++i) {
      clear();
      sync(device);
      double t0 = now_ms();
      scaled_dot_product_attention(q, k, v, {}, 0.0, causal).backward(g);
      sync(device);
      if (i >= 2) t.push_back(now_ms() - t0);  // two warm-ups
    }
    clear();
    return summarize(name, "ms", t);
  };
  std::string tag = std::string(causal ? "sdpa_causal_L" : "sdpa_L") + std::to_string(L);
  std::vector<Figure> out{run(SdpaBackend::Auto, repeat, tag + "_ms")};
  if (L == 1024 && !causal) {
    out.push_back(run(SdpaBackend::Math, std::max(1, repeat / 2), "sdpa_composed_L1024_ms"));
    for (SdpaBackend backend : {SdpaBackend::Flash, SdpaBackend::Math}) {
      SdpaBackendGuard guard(backend);
      sync(device);
      int64_t base = memory_stats(device).allocated_bytes;
      reset_peak_memory_stats(device);
      scaled_dot_product_attention(q, k, v, {}, 0.0, causal).backward(g);
      sync(device);
      double mib = static_cast<double>(memory_stats(device).peak_allocated_bytes - base) / (1 << 20);
      clear();
      out.push_back(summarize(backend == SdpaBackend::Flash ? "sdpa_L1024_peak_mib" : "sdpa_composed_L1024_peak_mib",
                              "MiB", {mib}));
    }
  }
  return out;
}

// One AdamW step (lr 2e-3, weight decay 0.05) of graft train's ViT (models::vit: patch 7, dim 64,
// depth 6, 4 heads, MLP 128) on a fixed batch of 128 randn images with random labels, as
// libtorch_reference.cpp's bench_vit.
std::vector<Figure> bench_vit_prec(int repeat, Device device, bool bf16) {
  manual_seed(0);
  auto model = models::vit();
  model->to(device);
  if (device.is_cpu()) model->to(MemoryFormat::ChannelsLast);  // as graft train
  optim::AdamW opt(model->parameters(), 2e-3, {0.9, 0.999}, 1e-8, 0.05);
  Tensor x = randn({128, 1, 28, 28}, TensorOptions{}.device(device)), y = randint(0, 10, {128}).to(device);
  auto t = time_ms(device, repeat, 2, [&] {
    opt.zero_grad(true);
    Tensor loss;
    {
      MaybeBf16Autocast mixed(bf16, device);
      loss = cross_entropy((*model)(x), y);
    }
    loss.backward();
    opt.step();
  });
  return {summarize(bf16 ? "vit_bf16_step_ms" : "vit_step_ms", "ms", t)};
}
std::vector<Figure> bench_vit(int repeat, Device device) { return bench_vit_prec(repeat, device, false); }

// One training iteration of graft train --model gpt at the recipe's shapes: the baby GPT (vocab
// 96), a batch of 12 windows of 64 random token ids, AdamW (lr 1e-3, betas 0.9/0.99, weight decay
// 0.1), clip_grad_norm_ 1.0, as tools/bench/pytorch_gpt.py --bench step and
// libtorch_train_reference gpt.
std::vector<Figure> bench_gpt_step(int repeat, Device device) {
  manual_seed(0);
  auto model = models::gpt(96);
  model->to(device);
  optim::AdamW opt(model->parameters(), 1e-3, {0.9, 0.99}, 1e-8, 0.1);
  Tensor x = randint(0, 96, {12, 64}).to(device), y = randint(0, 96, {12, 64}).to(device);
  auto t = time_ms(device, repeat, 3, [&] {
    opt.zero_grad(true);
    Tensor loss = cross_entropy((*model)(x).reshape({-1, 96}), y.flatten());
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
  });
  return {summarize("gpt_step_ms", "ms", t)};
}

// 200 characters sampled (temperature 1, all tokens) after a one-token prompt from the untrained
// baby GPT, with the KV cache and recomputing the context for each token (nn::generate), in
// tokens per second: the per-token cost of graft generate. The model's weights do not change what
// is computed, only which characters come out.
std::vector<Figure> bench_gpt_generate(int repeat, Device device) {
  manual_seed(0);
  auto model = models::gpt(96);
  model->to(device);
  std::vector<Figure> out;
  for (bool cache : {true, false}) {
    std::vector<double> rates;
    for (int i = 0; i < repeat + 1; ++i) {
      manual_seed(1);
      const double t0 = now_ms();
      nn::generate(*model, {0}, {.max_new_tokens = 200, .kv_cache = cache});
      sync(device);
      if (i >= 1) rates.push_back(200.0 / ((now_ms() - t0) / 1000.0));  // one warm-up
    }
    out.push_back(summarize(cache ? "gpt_generate_tokens_per_s" : "gpt_generate_nocache_tokens_per_s", "tokens/s",
                            rates));
  }
  return out;
}

// CUDA only: 100k random allocations and frees of 1 B - 4 MiB (log-uniform sizes, at most 64 live)
// through the caching allocator, against the same sequence with raw cudaMalloc/cudaFree. The
// sequence is fixed, so both sides do exactly the same requests.
std::vector<Figure> bench_alloc_churn(int repeat, Device device) {
#if GRAFT_HAVE_CUDA
  using graft::cuda::bench::ChurnStep;
  const int slots = 64, n = 100000;
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> log_size(0.0, std::log(4.0 * (1 << 20)));
  std::vector<ChurnStep> steps;
  std::vector<bool> live(slots, false);
  for (int i = 0; i < n; ++i) {
    int s = static_cast<int>(rng() % slots);
    steps.push_back({s, live[s] ? 0 : std::max<int64_t>(1, static_cast<int64_t>(std::exp(log_size(rng))))});
    live[s] = !live[s];
  }
  Allocator* alloc = get_allocator(device);
  std::vector<DataPtr> held(slots);
  auto release = [](DataPtr& p) {
    if (p.deleter) p.deleter(p.ctx, p.ptr);
    p = DataPtr{};
  };
  auto t = time_ms(device, repeat, 1, [&] {
    for (const auto& st : steps) {
      if (st.bytes > 0) held[st.slot] = alloc->allocate(static_cast<size_t>(st.bytes));
      else release(held[st.slot]);
    }
    for (auto& p : held) release(p);
  });
  for (auto& v : t) v = v * 1000.0 / n;
  // cudaFree synchronises the device: the raw side is slow, so it runs once.
  std::vector<double> raw{graft::cuda::bench::raw_churn_ms(steps, slots, device.index) * 1000.0 / n};
  Figure caching = summarize("alloc_churn_caching_us_per_op", "us", t), raw_f = summarize("alloc_churn_raw_us_per_op", "us", raw);
  std::vector<double> speedup{raw_f.median / caching.median};
  return {caching, raw_f, summarize("alloc_churn_speedup", "x", speedup)};
#else
  (void)repeat;
  (void)device;
  return {};
#endif
}

// The deep MLP of bench_deep_mlp as a Sequential of 64 (Linear + Tanh) children, with its
// parameters and the layers as functions (for checkpoint_sequential).
struct DeepMlp {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>();
  std::vector<Tensor> params;
  std::vector<nn::Layer> fns;
  Tensor x;
  explicit DeepMlp(Device device) {
    manual_seed(0);
    const int layers = 64, width = 1024, batch = 256;
    for (int i = 0; i < layers; ++i) {
      Tensor w = param({width, width}, 1.0 / std::sqrt(width), device), b = param({width}, 0.0, device);
      params.push_back(w);
      params.push_back(b);
      nn::Layer f = [w, b](const Tensor& h) { return linear(h, w, b).tanh(); };
      fns.push_back(f);
      model->emplace_back<nn::Functional>(f);
    }
    x = randn({batch, width}, TensorOptions{}.device(device));
  }
  // One training step of `forward` (the grads exist before and are zeroed after, so the step
  // allocates only activations and temporaries).
  void step(const std::function<Tensor(const Tensor&)>& forward) {
    // The output dies before backward, as in a training loop: a temporary living through
    // backward() would hold one more activation than any plan models.
    Tensor loss = forward(x).mean();
    loss.backward();
    NoGradGuard ng;
    for (auto& p : params) p.mutable_grad().zero_();
  }
};

// The same deep MLP trained under budgets of 50%,
// 25% and 12% of plain's activation peak through nn::plan_checkpoint: each budget reports the
// measured peak and step time next to the plan's predictions, recompute alone, with codecs
// (_compress_) and with codecs and offload (_offload_); 25% also the fastest
// checkpoint_sequential segment count whose measured peak fits it.
std::vector<Figure> bench_deep_mlp_budget(int repeat, Device device) {
  DeepMlp net(device);
  auto& model = net.model;
  auto& params = net.params;
  auto& fns = net.fns;
  Tensor x = net.x;
  // One training step of `forward`: activation peak (MiB above the start, grads preallocated).
  auto run = [&](const std::function<Tensor(const Tensor&)>& forward, std::vector<double>& peak) {
    return time_ms(device, repeat, 1, [&] {
      int64_t before = memory_stats(device).allocated_bytes;
      reset_peak_memory_stats(device);
      Tensor loss = forward(x).mean();
      loss.backward();
      peak.push_back(static_cast<double>(memory_stats(device).peak_allocated_bytes - before) / (1 << 20));
      NoGradGuard ng;
      for (auto& p : params) p.mutable_grad().zero_();
    });
  };
  std::vector<Figure> out;
  std::vector<double> plain_peak;
  auto plain_t = run([&](const Tensor& in) { return (*model)(in); }, plain_peak);
  plain_peak.erase(plain_peak.begin());
  double plain_mib = *std::max_element(plain_peak.begin(), plain_peak.end());
  out.push_back(summarize("deep_mlp_budget_plain_peak_mib", "MiB", plain_peak));
  out.push_back(summarize("deep_mlp_budget_plain_step_ms", "ms", plain_t));
  for (int pct : {50, 25, 12}) {
    auto budget = static_cast<int64_t>(plain_mib * (1 << 20) * pct / 100);
    nn::CheckpointPlan plan = nn::plan_checkpoint(*model, x, budget);
    std::vector<double> peak;
    auto t = run([&](const Tensor& in) { return nn::run_plan(*model, plan, in); }, peak);
    peak.erase(peak.begin());
    std::string n = "deep_mlp_budget_" + std::to_string(pct);
    out.push_back(summarize(n + "_budget_mib", "MiB", {static_cast<double>(budget) / (1 << 20)}));
    out.push_back(summarize(n + "_peak_mib", "MiB", peak));
    out.push_back(summarize(n + "_predicted_peak_mib", "MiB", {static_cast<double>(plan.predicted_peak_bytes) / (1 << 20)}));
    out.push_back(summarize(n + "_step_ms", "ms", t));
    // Plain's measured step plus the plan's extra (recompute) time from the measured forward times.
    double fwd_ms = 0;
    for (const auto& l : plan.profiles) fwd_ms += l.forward_seconds * 1e3;
    out.push_back(summarize(n + "_predicted_step_ms", "ms",
                            {summarize("", "", plain_t).median + plan.predicted_extra_forward * fwd_ms}));
    // The same budget with compression as a fourth decision (bf16 and int8 candidates, each
    // checked against the exact gradients first), then with offload too (to disk in the temp
    // directory on a CPU, to pinned host memory on CUDA): every lever the planner has. Offloaded
    // bytes leave the allocator's count, which is what the budget bounds.
    auto levers = [&](const std::string& tag, bool offload) {
      nn::BudgetOptions bo;
      bo.codecs = {autograd::SavedCodec::kBf16, autograd::SavedCodec::kInt8};
      if (offload) {
        bo.allow_offload = true;
        if (device.is_cpu()) bo.offload_dir = std::filesystem::temp_directory_path().string();
      }
      nn::CheckpointPlan cp = nn::plan_checkpoint(*model, x, budget, bo);
      std::vector<double> cpeak;
      auto ct = run([&](const Tensor& in) { return nn::run_plan(*model, cp, in); }, cpeak);
      cpeak.erase(cpeak.begin());
      int compressed = 0, offloaded = 0;
      for (size_t i = 0; i < cp.codec.size(); ++i) {
        compressed += cp.codec[i].empty() ? 0 : 1;
        offloaded += cp.decisions[i] == autograd::CheckpointPolicy::MustOffload ? 1 : 0;
      }
      double worst = 0;
      for (const auto& c : cp.codec_checks) worst = std::max(worst, c.accepted ? c.grad_error : 0.0);
      const Figure step = summarize(n + "_" + tag + "_step_ms", "ms", ct);
      out.push_back(summarize(n + "_" + tag + "_peak_mib", "MiB", cpeak));
      out.push_back(summarize(n + "_" + tag + "_predicted_peak_mib", "MiB",
                              {static_cast<double>(cp.predicted_peak_bytes) / (1 << 20)}));
      out.push_back(step);
      out.push_back(summarize(n + "_" + tag + "_vs_plain", "x", {step.median / summarize("", "", plain_t).median}));
      out.push_back(summarize(n + "_" + tag + (offload ? "_compressed_layers" : "_layers"), "layers",
                              {static_cast<double>(compressed)}));
      if (offload) out.push_back(summarize(n + "_" + tag + "_offloaded_layers", "layers", {static_cast<double>(offloaded)}));
      out.push_back(summarize(n + "_" + tag + "_grad_error", "rel", {worst}));
    };
    levers("compress", false);
    levers("offload", true);
    if (pct == 25) {
      // The sweep: the fastest segment count that fits, and the lowest peak any count reaches.
      double best = -1, lowest = -1, lowest_ms = -1;
      for (int seg = 2; seg <= 16; ++seg) {
        std::vector<double> sp;
        auto st = run([&](const Tensor& in) { return nn::checkpoint_sequential(fns, seg, in); }, sp);
        sp.erase(sp.begin());
        double med = summarize("", "", st).median, pk = *std::max_element(sp.begin(), sp.end());
        if (pk * (1 << 20) <= static_cast<double>(budget) && (best < 0 || med < best)) best = med;
        if (lowest < 0 || pk < lowest || (pk == lowest && med < lowest_ms)) {
          lowest = pk;
          lowest_ms = med;
        }
      }
      out.push_back(summarize(n + "_sequential_lowest_peak_mib", "MiB", {lowest}));
      out.push_back(summarize(n + "_sequential_lowest_peak_step_ms", "ms", {lowest_ms}));
      if (best > 0) out.push_back(summarize(n + "_best_sequential_ms", "ms", {best}));
    }
  }
  return out;
}

// The deep MLP with every saved activation written to disk (SaveOnDisk with no size threshold;
// parameters stay where their module holds them), backward with prefetch off and with the
// engine's lookahead at K = 2: peak, step time, and the ratio to plain's step. CPU only: on CUDA the
// same trip goes to pinned host memory (deep_mlp_offload).
std::vector<Figure> bench_deep_mlp_disk(int repeat, Device device) {
  DeepMlp net(device);
  auto& params = net.params;
  auto& fns = net.fns;
  Tensor x = net.x;
  std::string dir = std::filesystem::temp_directory_path().string();
  std::vector<Figure> out;
  double plain_ms = 0;
  const char* modes[] = {"plain", "off", "k2"};
  for (int mode = 0; mode < 3; ++mode) {
    autograd::set_unpack_prefetch(mode == 2 ? 2 : 0);
    std::vector<double> peak;
    auto t = time_ms(device, repeat, 1, [&] {
      int64_t before = memory_stats(device).allocated_bytes;
      reset_peak_memory_stats(device);
      Tensor loss;
      {
        std::optional<autograd::SaveOnDisk> disk;
        if (mode > 0) disk.emplace(dir, 0);
        Tensor h = x;
        for (auto& f : fns) h = f(h);
        loss = h.mean();
      }
      loss.backward();
      peak.push_back(static_cast<double>(memory_stats(device).peak_allocated_bytes - before) / (1 << 20));
      NoGradGuard ng;
      for (auto& p : params) p.mutable_grad().zero_();
    });
    autograd::set_unpack_prefetch(0);
    peak.erase(peak.begin());
    Figure step = summarize("deep_mlp_disk_" + std::string(modes[mode]) + "_step_ms", "ms", t);
    if (mode == 0) plain_ms = step.median;
    out.push_back(summarize("deep_mlp_disk_" + std::string(modes[mode]) + "_peak_mib", "MiB", peak));
    out.push_back(step);
    if (mode > 0) out.push_back(summarize("deep_mlp_disk_" + std::string(modes[mode]) + "_vs_plain", "x", {step.median / plain_ms}));
  }
  return out;
}

// graft train's step on its CNN and ViT (batch 128 of randn images, random labels): forward,
// cross-entropy, backward, the optimizer's step, gradients set to none before the forward, as the
// Trainer runs it. Plain, and alternately with it an AutoCheckpoint at the share of plain's
// peak (CNN 50%, ViT 30%) with the optimizer's state and the batch inside the budget and bf16/int8 as
// candidate codecs, as `graft train --memory-budget SIZE --compress auto`. Peaks are the whole
// step's, above what was allocated before the first step (the model), over every step, the first
// (which plans) included. A share no plan reaches reports the minimum instead, and the
// smallest budget a plan reaches (the minimum plus 1%) is run in its place.
std::vector<Figure> bench_train_budget(int repeat, Device device) {
  std::vector<Figure> out;
  for (auto [kind, name, pct] : {std::tuple{models::Kind::Cnn, "cnn", 50}, std::tuple{models::Kind::Vit, "vit", 30}}) {
    manual_seed(0);
    models::Model m = models::make_model(kind);
    models::place_on(*m.module, device);
    std::unique_ptr<optim::Optimizer> opt;
    if (kind == models::Kind::Vit) opt = std::make_unique<optim::AdamW>(m.module->parameters(), 2e-3, std::pair{0.9, 0.999}, 1e-8, 0.05);
    else opt = std::make_unique<optim::Adam>(m.module->parameters(), 1e-3);
    auto on = TensorOptions{}.device(device);
    Tensor x = randn({128, 1, 28, 28}, on), y = randint(0, 10, {128}, on);
    const int64_t base = memory_stats(device).allocated_bytes;  // the model (and x, y: held outside either way)
    // One step of `forward`: its time, and its peak above `base`.
    auto step = [&](const std::function<Tensor(const Tensor&)>& forward, std::vector<double>& ms) {
      sync(device);
      reset_peak_memory_stats(device);
      const double t0 = now_ms();
      opt->zero_grad(true);
      Tensor loss = cross_entropy(forward(x), y);
      loss.backward();
      opt->step();
      sync(device);
      ms.push_back(now_ms() - t0);
      return static_cast<double>(memory_stats(device).peak_allocated_bytes - base) / (1 << 20);
    };
    auto plain_forward = [&](const Tensor& in) { return (*m.module)(in); };
    const std::string n = std::string(name) + "_budget";
    // Two plain steps first: their peak sets the budget (the steps are deterministic in memory).
    std::vector<double> warm_ms, plain_ms, ms;
    double plain_peak = 0;
    for (int i = 0; i < 2; ++i) plain_peak = std::max(plain_peak, step(plain_forward, warm_ms));
    nn::BudgetOptions bo;
    bo.codecs = {autograd::SavedCodec::kBf16, autograd::SavedCodec::kInt8};
    bo.outside_bytes = opt->state_bytes();
    bo.input_in_budget = true;
    int64_t budget = static_cast<int64_t>(plain_peak * (1 << 20) * pct / 100);
    std::string row = n + "_" + std::to_string(pct);
    const Figure budget_fig = summarize(row + "_budget_mib", "MiB", {static_cast<double>(budget) / (1 << 20)});
    std::vector<Figure> minimum_figs;
    try {
      (void)nn::plan_checkpoint(*m.stages, x, budget, bo);
    } catch (const Error& e) {
      // No plan reaches the share: the minimum the planner names, and the run at just above it.
      const std::string msg = e.what();
      const auto at = msg.find("the minimum any plan reaches is ");
      if (at == std::string::npos) throw;
      const int64_t minimum = std::stoll(msg.substr(msg.find('(', at) + 1));
      minimum_figs.push_back(summarize(row + "_minimum_mib", "MiB", {static_cast<double>(minimum) / (1 << 20)}));
      minimum_figs.push_back(summarize(row + "_minimum_vs_plain", "x", {static_cast<double>(minimum) / (1 << 20) / plain_peak}));
      budget = minimum + minimum / 100;
      row = n + "_min";
      minimum_figs.push_back(summarize(row + "_budget_mib", "MiB", {static_cast<double>(budget) / (1 << 20)}));
    }
    auto ac = std::make_shared<nn::AutoCheckpoint>(m.stages, budget, bo);
    auto budget_forward = [&](const Tensor& in) { return (*ac)(in); };
    // The two steps that plan (untimed; their peak counts for the run's), then plain and planned
    // steps alternately, so drift in the machine's speed (these machines are noisy) falls on both.
    double peak = 0, step_peak = 0;
    for (int i = 0; i < 2; ++i) peak = std::max(peak, step(budget_forward, warm_ms));
    for (int i = 0; i < repeat; ++i) {
      plain_peak = std::max(plain_peak, step(plain_forward, plain_ms));
      step_peak = std::max(step_peak, step(budget_forward, ms));
    }
    peak = std::max(peak, step_peak);
    const Figure plain = summarize(n + "_plain_step_ms", "ms", plain_ms);
    out.push_back(summarize(n + "_plain_peak_mib", "MiB", {plain_peak}));
    out.push_back(plain);
    out.push_back(budget_fig);
    out.insert(out.end(), minimum_figs.begin(), minimum_figs.end());
    const nn::CheckpointPlan& plan = ac->plan();
    const Figure step_ms = summarize(row + "_step_ms", "ms", ms);
    // The run's peak (planning included: it must fit the budget too) and the planned steps' own,
    // which is what the plan predicts.
    out.push_back(summarize(row + "_peak_mib", "MiB", {peak}));
    out.push_back(summarize(row + "_step_peak_mib", "MiB", {step_peak}));
    out.push_back(summarize(row + "_predicted_peak_mib", "MiB",
                            {static_cast<double>(plan.predicted_peak_bytes + plan.budget_bytes - plan.step_budget_bytes) / (1 << 20)}));
    out.push_back(step_ms);
    out.push_back(summarize(row + "_vs_plain", "x", {step_ms.median / plain.median}));
    int compressed = 0, recomputed = 0;
    for (size_t i = 0; i < plan.codec.size(); ++i) {
      compressed += plan.codec[i].empty() ? 0 : 1;
      recomputed += plan.decisions[i] == autograd::CheckpointPolicy::MustRecompute ? 1 : 0;
    }
    out.push_back(summarize(row + "_compressed_layers", "layers", {static_cast<double>(compressed)}));
    out.push_back(summarize(row + "_recomputed_layers", "layers", {static_cast<double>(recomputed)}));
  }
  return out;
}

// The memory timeline of the deep MLP: one step plain, with checkpoint_sequential(8) (the usual
// hand-picked mode), under the 25% budget plan, and with every activation on disk.
std::vector<graft::train::TimelineSeries> timeline_deep_mlp(Device device) {
  DeepMlp net(device);
  net.step([&](const Tensor& in) { return (*net.model)(in); });  // allocates the grads
  auto logged = [&](const std::string& label, const std::function<Tensor(const Tensor&)>& forward) {
    return graft::train::record_timeline(label, device, [&] { net.step(forward); });
  };
  std::vector<graft::train::TimelineSeries> out;
  out.push_back(logged("plain", [&](const Tensor& in) { return (*net.model)(in); }));
  int64_t plain_peak = 0;
  for (const auto& e : out.back().events) plain_peak = std::max(plain_peak, e.bytes);
  out.push_back(logged("checkpoint_sequential 8", [&](const Tensor& in) { return nn::checkpoint_sequential(net.fns, 8, in); }));
  nn::CheckpointPlan plan = nn::plan_checkpoint(*net.model, net.x, plain_peak / 4);
  out.push_back(logged("budget 25%", [&](const Tensor& in) { return nn::run_plan(*net.model, plan, in); }));
  if (device.is_cpu()) {
    std::string dir = std::filesystem::temp_directory_path().string();
    out.push_back(logged("all on disk", [&](const Tensor& in) {
      autograd::SaveOnDisk disk(dir, 0);
      return (*net.model)(in);
    }));
  }
  return out;
}

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"engine", bench_engine, 10},          {"mlp", bench_mlp, 10},     {"cnn", bench_cnn, 5},
      {"matmul1024", bench_matmul, 10, kOnCpu},
      {"matmul1024_bf16", bench_matmul_bf16, 10, kOnCpu},
      {"mlp_bf16", [](int r, Device d) { return bench_mlp_prec(r, d, true); }, 10},
      {"cnn_bf16", bench_cnn_bf16, 5},
      {"cnn_peak", bench_cnn_peak, 1},
      {"max_pool2x2", bench_max_pool2x2, 10},
      {"conv_patch_wgrad", bench_conv_patch_wgrad, 10},
      {"vit_bf16", [](int r, Device d) { return bench_vit_prec(r, d, true); }, 10},
      {"matmul4096", bench_matmul4096, 10, kOnCuda},
      {"elementwise_add", bench_add, 10},
      {"stream_triad", bench_stream_triad, 10, kOnCpu},
      {"deep_mlp", bench_deep_mlp, 3},       {"alloc_churn", bench_alloc_churn, 5, kOnCuda},
      {"deep_mlp_budget", bench_deep_mlp_budget, 3, kOnBoth, timeline_deep_mlp},
      {"deep_mlp_disk", bench_deep_mlp_disk, 3, kOnCpu, timeline_deep_mlp},
      {"train_budget", bench_train_budget, 5},
      {"train_epoch", bench_train_epoch, 3},
      {"train_epoch_trainer", bench_train_epoch_trainer, 3},
#if GRAFT_HAVE_DIST
      {"train_epoch_ddp", bench_train_epoch_ddp, 3, kOnCpu},
#endif
      {"sdpa_L16", [](int r, Device d) { return bench_sdpa(16, false, r, d); }, 50},
      {"sdpa_L64", [](int r, Device d) { return bench_sdpa(64, false, r, d); }, 30},
      {"sdpa_L256", [](int r, Device d) { return bench_sdpa(256, false, r, d); }, 10},
      {"sdpa_L1024", [](int r, Device d) { return bench_sdpa(1024, false, r, d); }, 5},
      {"sdpa_causal_L1024", [](int r, Device d) { return bench_sdpa(1024, true, r, d); }, 5},
      {"vit", bench_vit, 10},
      {"eval", bench_eval, 10},
      {"gpt_step", bench_gpt_step, 10},
      {"gpt_generate", bench_gpt_generate, 3},
  };
  return w;
}

}  // namespace graft_bench
