// The libtorch side of the comparison: the same workloads, shapes and figure names as
// graft_workloads.cpp, written with libtorch's C++ API, so `compare.sh` pairs them by name.
// Built only with -Dlibtorch_bench=enabled; graft itself never links libtorch.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <regex>

#include "tools/bench/bench_stats.h"

using namespace graft_bench;

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

torch::Tensor param(at::IntArrayRef shape, double scale) { return (torch::randn(shape) * scale).requires_grad_(); }

// Each framework's library optimizer, as graft_workloads.cpp: torch::optim::SGD/Adam, grads set
// to none after each step (by hand: libtorch 1.13's zero_grad() takes no set_to_none).
void grads_to_none(torch::optim::Optimizer& opt) {
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

struct Sgd {
  torch::optim::SGD opt;
  Sgd(std::vector<torch::Tensor> p, double lr, double m) : opt(p, torch::optim::SGDOptions(lr).momentum(m)) {}
  void step() {
    opt.step();
    grads_to_none(opt);
  }
};

struct Adam {
  torch::optim::Adam opt;
  Adam(std::vector<torch::Tensor> p, double lr) : opt(p, torch::optim::AdamOptions(lr)) {}
  void step() {
    opt.step();
    grads_to_none(opt);
  }
};

std::vector<Figure> bench_engine(int repeat) {
  auto x = torch::ones({4}, torch::requires_grad());
  auto t = time_ms(repeat, 2, [&] {
    auto y = x;
    for (int i = 0; i < 2000; ++i) y = y * 1.0001 + 0.0;
    y.sum().backward();
  });
  for (auto& v : t) v = v * 1000.0 / 4000.0;
  return {summarize("engine_us_per_op", "us", t)};
}

// CPU autocast to bfloat16 for a scope, as torch.autocast("cpu", dtype=torch.bfloat16): libtorch's
// C++ API has only the free functions. The cast cache is cleared at exit, as the Python guard does.
struct Bf16Autocast {
  bool on;
  explicit Bf16Autocast(bool enable) : on(enable) {
    if (!on) return;
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~Bf16Autocast() {
    if (!on) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
};

std::vector<Figure> bench_mlp_prec(int repeat, bool bf16) {
  torch::manual_seed(0);
  auto w1 = param({512, 784}, 0.035), b1 = param({512}, 0.0), w2 = param({512, 512}, 0.044), b2 = param({512}, 0.0),
       w3 = param({10, 512}, 0.044), b3 = param({10}, 0.0);
  Sgd opt({w1, b1, w2, b2, w3, b3}, 0.01, 0.9);
  auto x = torch::randn({128, 784});
  auto y = torch::randint(0, 10, {128});
  auto t = time_ms(repeat, 3, [&] {
    torch::Tensor loss;
    {
      Bf16Autocast ac(bf16);
      auto h = torch::relu(torch::linear(x, w1, b1));
      h = torch::relu(torch::linear(h, w2, b2));
      loss = torch::nn::functional::cross_entropy(torch::linear(h, w3, b3), y);
    }
    loss.backward();
    opt.step();
  });
  return {summarize(bf16 ? "mlp_bf16_step_ms" : "mlp_step_ms", "ms", t)};
}
std::vector<Figure> bench_mlp(int repeat) { return bench_mlp_prec(repeat, false); }

// NCHW, and the same step with the input and the first conv weight made channels-last (as graft's workload).
Figure bench_cnn_layout(int repeat, bool channels_last, bool bf16 = false) {
  torch::manual_seed(0);
  auto c1 = param({32, 1, 3, 3}, 0.33), cb1 = param({32}, 0.0), c2 = param({64, 32, 3, 3}, 0.059),
       cb2 = param({64}, 0.0), f1 = param({128, 3136}, 0.018), fb1 = param({128}, 0.0), f2 = param({10, 128}, 0.088),
       fb2 = param({10}, 0.0);
  if (channels_last) c1 = c1.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_();
  Adam opt({c1, cb1, c2, cb2, f1, fb1, f2, fb2}, 1e-3);
  auto x = torch::randn({64, 1, 28, 28});
  auto y = torch::randint(0, 10, {64});
  if (channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  auto t = time_ms(repeat, 2, [&] {
    torch::Tensor loss;
    {
      Bf16Autocast ac(bf16);
      auto h = torch::max_pool2d(torch::relu(torch::conv2d(x, c1, cb1, 1, 1)), 2);
      h = torch::max_pool2d(torch::relu(torch::conv2d(h, c2, cb2, 1, 1)), 2);
      h = torch::relu(torch::linear(h.flatten(1), f1, fb1));
      loss = torch::nn::functional::cross_entropy(torch::linear(h, f2, fb2), y);
    }
    loss.backward();
    opt.step();
  });
  if (bf16) return summarize("cnn_channels_last_bf16_step_ms", "ms", t);
  return summarize(channels_last ? "cnn_channels_last_step_ms" : "cnn_step_ms", "ms", t);
}

std::vector<Figure> bench_cnn(int repeat) { return {bench_cnn_layout(repeat, false), bench_cnn_layout(repeat, true)}; }

std::vector<Figure> bench_matmul_bf16(int repeat) {
  torch::manual_seed(0);
  auto a = torch::randn({1024, 1024}).to(torch::kBFloat16), b = torch::randn({1024, 1024}).to(torch::kBFloat16);
  auto t = time_ms(repeat, 2, [&] { auto c = a.matmul(b); });
  std::vector<double> gflops;
  for (double ms : t) gflops.push_back(2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
  return {summarize("matmul1024_bf16_gflops", "GFLOP/s", gflops)};
}

std::vector<Figure> bench_matmul(int repeat) {
  torch::manual_seed(0);
  auto a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  auto t = time_ms(repeat, 2, [&] { auto c = a.matmul(b); });
  std::vector<double> gflops;
  for (double ms : t) gflops.push_back(2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
  return {summarize("matmul1024_gflops", "GFLOP/s", gflops)};
}

std::vector<Figure> bench_add(int repeat) {
  auto a = torch::randn({1 << 24}), b = torch::randn({1 << 24});
  auto t = time_ms(repeat, 2, [&] { auto c = a + b; });
  std::vector<double> gbps;
  for (double ms : t) gbps.push_back(3.0 * 4 * (1 << 24) / (ms * 1e6));
  return {summarize("elementwise_add_gbps", "GB/s", gbps)};
}

// libtorch's C++ API has no torch::utils::checkpoint (it is Python-only), so the reference writes
// the reentrant form as a custom Function: forward without a graph, keeping only the segment's
// input (and its parameters, which live anyway); backward re-runs the layers with grad on and
// differentiates them, as torch.utils.checkpoint(use_reentrant=True) does.
struct CheckpointSegment : torch::autograd::Function<CheckpointSegment> {
  // params = [w_lo, b_lo, w_lo+1, b_lo+1, ...]
  static torch::Tensor run(torch::Tensor h, at::TensorList params) {
    for (size_t i = 0; i + 1 < params.size(); i += 2) h = torch::tanh(torch::linear(h, params[i], params[i + 1]));
    return h;
  }
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, at::TensorList params) {
    std::vector<torch::Tensor> keep{x};
    keep.insert(keep.end(), params.begin(), params.end());
    ctx->save_for_backward(keep);
    return run(x, params);  // Function::apply runs forward with grad mode off
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor x = saved[0].detach().requires_grad_(true);
    std::vector<torch::Tensor> params(saved.begin() + 1, saved.end());
    torch::Tensor h;
    {
      torch::AutoGradMode on(true);
      h = run(x, params);
    }
    std::vector<torch::Tensor> inputs{x};
    inputs.insert(inputs.end(), params.begin(), params.end());
    return torch::autograd::grad({h}, inputs, {g[0]});  // one grad per forward input: x, then each param
  }
};

std::vector<Figure> bench_deep_mlp(int repeat) {
  torch::manual_seed(0);
  const int layers = 64, width = 1024, batch = 256;
  std::vector<torch::Tensor> ws, bs;
  for (int i = 0; i < layers; ++i) {
    ws.push_back(param({width, width}, 1.0 / std::sqrt(width)));
    bs.push_back(param({width}, 0.0));
  }
  auto x = torch::randn({batch, width});
  std::vector<Figure> out;
  for (int mode = 0; mode < 2; ++mode) {
    auto t = time_ms(repeat, 1, [&] {
      torch::Tensor h = x;
      if (mode == 0) {
        for (int i = 0; i < layers; ++i) h = torch::tanh(torch::linear(h, ws[i], bs[i]));
      } else {  // 8 checkpointed segments, the last one plain, as graft's checkpoint_sequential
        const int seg = layers / 8;
        int lo = 0;
        for (; lo + seg < layers; lo += seg) {
          std::vector<torch::Tensor> params;
          for (int i = lo; i < lo + seg; ++i) {
            params.push_back(ws[i]);
            params.push_back(bs[i]);
          }
          h = CheckpointSegment::apply(h, at::TensorList(params));
        }
        for (int i = lo; i < layers; ++i) h = torch::tanh(torch::linear(h, ws[i], bs[i]));
      }
      h.mean().backward();
      // As graft's side: grads stay allocated and backward accumulates into them.
      torch::NoGradGuard ng;
      for (int i = 0; i < layers; ++i) {
        ws[i].mutable_grad().zero_();
        bs[i].mutable_grad().zero_();
      }
    });
    // libtorch's CPU allocator keeps no statistics: times only.
    out.push_back(summarize(mode == 0 ? "deep_mlp_step_ms" : "deep_mlp_sqrt_step_ms", "ms", t));
  }
  return out;
}

// scaled_dot_product_attention, forward + backward: q, k, v = randn [4, 4, L, 64] (batch 4, heads 4,
// head dim 64), no mask, no dropout; out.backward(g) with a fixed g. The grads are set to none
// between iterations, outside the timed region, so each backward writes fresh ones. libtorch 1.13
// has no scaled_dot_product_attention (added in 2.0): there these workloads print nothing.
std::vector<Figure> bench_sdpa(int L, bool causal, int repeat) {
#if TORCH_VERSION_MAJOR >= 2
  torch::manual_seed(0);
  auto q = torch::randn({4, 4, L, 64}).requires_grad_(), k = torch::randn({4, 4, L, 64}).requires_grad_(),
       v = torch::randn({4, 4, L, 64}).requires_grad_();
  auto g = torch::randn({4, 4, L, 64});
  auto iteration = [&] {
    auto out = torch::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
    out.backward(g);
  };
  auto clear = [&] {
    for (auto* t : {&q, &k, &v}) t->mutable_grad().reset();
  };
  for (int i = 0; i < 2; ++i) {
    iteration();
    clear();
  }
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    double t0 = now_ms();
    iteration();
    t.push_back(now_ms() - t0);
    clear();
  }
  return {summarize(std::string(causal ? "sdpa_causal_L" : "sdpa_L") + std::to_string(L) + "_ms", "ms", t)};
#else
  (void)L, (void)causal, (void)repeat;
  return {};
#endif
}

// The ViT of graft_workloads.cpp (the same model as libtorch_train_reference.cpp's `vit` mode):
// patch embedding Conv2d(1, 64, 7, stride 7) -> [N, 16, 64], a learned CLS token prepended and a
// learned positional embedding [17, 64] added, 6 pre-norm encoder layers (d_model 64, 4 heads,
// feed-forward 128, GELU, no dropout), a final LayerNorm and Linear(64, 10) on token 0.
// libtorch's C++ TransformerEncoderLayer has neither norm_first nor batch_first (1.13 and 2.x
// alike: it is post-norm over [L, N, E] only), so the pre-norm layer is written here from the same
// parts Python's nn.TransformerEncoderLayer(norm_first=True) uses: x + attn(norm1(x)), then
// x + linear2(gelu(linear1(norm2(x)))), with torch::nn::MultiheadAttention (no batch_first in C++
// either: the sequence is kept as [L, N, E] through the encoder). Unlike Python's
// nn.TransformerEncoder, which deep-copies one layer, each layer is initialised independently; and
// C++'s MultiheadAttention computes the attention with bmm, softmax, bmm where Python's (with
// need_weights=False) calls scaled_dot_product_attention: at 17 tokens the difference is small.
struct VitBlockImpl : torch::nn::Module {
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::MultiheadAttention self_attn{nullptr};
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  VitBlockImpl(int64_t d, int64_t heads, int64_t ff) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    self_attn = register_module("self_attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d, heads)));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    linear1 = register_module("linear1", torch::nn::Linear(d, ff));
    linear2 = register_module("linear2", torch::nn::Linear(ff, d));
  }
  torch::Tensor forward(torch::Tensor x) {  // [L, N, E]
    auto h = norm1(x);
    x = x + std::get<0>(self_attn->forward(h, h, h, torch::Tensor(), /*need_weights=*/false));
    return x + linear2(torch::gelu(linear1(norm2(x))));
  }
};
TORCH_MODULE(VitBlock);

struct VitImpl : torch::nn::Module {
  torch::nn::Conv2d patch{nullptr};
  torch::Tensor cls, pos;
  std::vector<VitBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
  VitImpl() {
    patch = register_module("patch", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 64, 7).stride(7)));
    cls = register_parameter("cls", torch::randn({1, 1, 64}) * 0.02);
    pos = register_parameter("pos", torch::randn({17, 64}) * 0.02);
    for (int i = 0; i < 6; ++i) blocks.push_back(register_module("layer" + std::to_string(i), VitBlock(64, 4, 128)));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({64})));
    head = register_module("head", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {  // [N, 1, 28, 28] -> [N, 10]
    auto h = patch(x).flatten(2).transpose(1, 2);                    // [N, 16, 64]
    h = torch::cat({cls.expand({h.size(0), 1, 64}), h}, 1) + pos;    // [N, 17, 64]
    h = h.transpose(0, 1);                                           // [17, N, 64]
    for (auto& b : blocks) h = b(h);
    return head(norm(h)[0]);                                         // token 0
  }
};
TORCH_MODULE(Vit);

// One AdamW step (lr 2e-3, weight decay 0.05) of the ViT on a fixed batch of 128 randn images.
std::vector<Figure> bench_vit_prec(int repeat, bool bf16) {
  torch::manual_seed(0);
  Vit model;
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.05));
  auto x = torch::randn({128, 1, 28, 28});
  auto y = torch::randint(0, 10, {128});
  auto t = time_ms(repeat, 2, [&] {
    grads_to_none(opt);
    torch::Tensor loss;
    {
      Bf16Autocast ac(bf16);
      loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    }
    loss.backward();
    opt.step();
  });
  return {summarize(bf16 ? "vit_bf16_step_ms" : "vit_step_ms", "ms", t)};
}
std::vector<Figure> bench_vit(int repeat) { return bench_vit_prec(repeat, false); }

struct Workload {
  std::string name;
  std::vector<Figure> (*run)(int);
  int default_repeat;
};

// graft_workloads.cpp's train_epoch: one epoch of the MLP recipe over 60000 synthetic images,
// shuffled batches of 128 gathered with index_select as graft's DataLoader does.
std::vector<Figure> bench_train_epoch(int repeat) {
  torch::manual_seed(0);
  torch::Tensor images = torch::rand({60000, 1, 28, 28}), labels = torch::randint(0, 10, {60000});
  torch::nn::Sequential model(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 10));
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  const int64_t n = 60000, bs = 128, steps = (n + bs - 1) / bs;
  int64_t step = 0;
  auto t = time_ms(repeat, 1, [&] {
    torch::Tensor perm = torch::randperm(n);
    for (int64_t i = 0; i < n; i += bs) {
      torch::Tensor idx = perm.slice(0, i, std::min(n, i + bs));
      torch::Tensor x = images.index_select(0, idx), y = labels.index_select(0, idx);
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward((x - 0.2860) * (1.0 / 0.3530)), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      // cosine schedule over two epochs, as graft's side
      double lr = 1e-3 * (1 + std::cos(M_PI * static_cast<double>(++step) / static_cast<double>(2 * steps))) / 2;
      for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
    }
  });
  std::vector<double> s;
  for (double ms : t) s.push_back(ms / 1000.0);
  return {summarize("train_mlp_epoch_s", "s", s)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"libtorch reference for graft bench"};
  std::string filter = ".*", json;
  int repeat = 0, threads = 0;
  app.add_option("--filter", filter, "regex over workload names");
  app.add_option("--repeat", repeat, "timed repeats per workload (default: per workload)");
  app.add_option("--json", json, "write the figures as JSON");
  app.add_option("--threads", threads, "intra-op threads (default: all cores)");
  bool about = false;
  app.add_flag("--about", about, "print one line: libtorch's version, its BLAS and thread count, then exit");
  CLI11_PARSE(app, argc, argv);
  if (about) {
    // compare.sh's header: which anchor this binary is (Debian's 1.13 or the PyPI wheel).
    std::string config = at::show_config(), blas = "?";
    auto at_blas = config.find("BLAS_INFO=");
    if (at_blas != std::string::npos) blas = config.substr(at_blas + 10, config.find_first_of(", \n", at_blas) - at_blas - 10);
    std::printf("libtorch %d.%d.%d, BLAS %s, %d threads\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                TORCH_VERSION_PATCH, blas.c_str(), torch::get_num_threads());
    return 0;
  }
  if (threads > 0) torch::set_num_threads(threads);
  std::vector<Workload> ws = {{"engine", bench_engine, 10},        {"mlp", bench_mlp, 10},
                              {"cnn", bench_cnn, 5},              {"matmul1024", bench_matmul, 10},
                              {"elementwise_add", bench_add, 10}, {"deep_mlp", bench_deep_mlp, 3},
                              {"train_epoch", bench_train_epoch, 3},
                              {"sdpa_L16", [](int r) { return bench_sdpa(16, false, r); }, 50},
                              {"sdpa_L64", [](int r) { return bench_sdpa(64, false, r); }, 30},
                              {"sdpa_L256", [](int r) { return bench_sdpa(256, false, r); }, 10},
                              {"sdpa_L1024", [](int r) { return bench_sdpa(1024, false, r); }, 5},
                              {"sdpa_causal_L1024", [](int r) { return bench_sdpa(1024, true, r); }, 5},
                              {"vit", bench_vit, 10},
                              {"matmul1024_bf16", bench_matmul_bf16, 10},
                              {"mlp_bf16", [](int r) { return bench_mlp_prec(r, true); }, 10},
                              {"cnn_bf16", [](int r) { return std::vector<Figure>{bench_cnn_layout(r, true, true)}; }, 5},
                              {"vit_bf16", [](int r) { return bench_vit_prec(r, true); }, 10}};
  std::regex re(filter);
  std::vector<Figure> all;
  for (auto& w : ws) {
    if (!std::regex_search(w.name, re)) continue;
    for (auto& f : w.run(repeat > 0 ? repeat : w.default_repeat)) {
      print_figure(f);
      all.push_back(f);
    }
  }
  if (!json.empty()) std::ofstream(json) << figures_json(all);
  return 0;
}
