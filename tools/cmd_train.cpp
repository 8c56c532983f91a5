// `graft train` and `graft eval` on Fashion-MNIST.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "graft.h"
#include "models/model.h"
#include "data/data_loader.h"
#include "data/fashion_mnist.h"
#include "optim/optimizer.h"
#include "optim/lr_scheduler.h"
#include "nn/serialize.h"
#include "tools/commands.h"
#include "train/memory_timeline_chart.h"
#if GRAFT_HAVE_DIST
#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/distributed_sampler.h"
#endif

namespace graft::tools {

namespace {

using clk = std::chrono::steady_clock;
double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// weight_decay < 0: the optimizer's own default (0 for sgd and adam, 0.01 for adamw).
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params, double lr,
                                                 double weight_decay) {
  if (name == "sgd") return std::make_unique<optim::SGD>(std::move(params), lr, 0.9, 0, std::max(0.0, weight_decay));
  if (name == "adam")
    return std::make_unique<optim::Adam>(std::move(params), lr, std::pair<double, double>{0.9, 0.999}, 1e-8,
                                         std::max(0.0, weight_decay));
  if (name == "adamw")
    return std::make_unique<optim::AdamW>(std::move(params), lr, std::pair<double, double>{0.9, 0.999}, 1e-8,
                                          weight_decay < 0 ? 1e-2 : weight_decay);
  GRAFT_ERROR("train: unknown optimizer '", name, "' (expected sgd, adam or adamw)");
}

// Runs the model's layers plainly or under checkpointing.
Tensor run_model(nn::Sequential& model, const Tensor& x, const std::string& checkpoint) {
  if (checkpoint == "none") return model(x);
  std::vector<nn::Layer> layers;
  for (const auto& m : model) layers.push_back([m](const Tensor& h) { return (*m)(h); });
  if (checkpoint == "sqrt")
    return nn::checkpoint_sequential(layers, std::max<int64_t>(1, std::lround(std::sqrt(layers.size()))), x);
  return nn::checkpoint_nested(layers, x);
}

struct EvalResult {
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion;  // [true * 10 + predicted]
};

// Pixels standardised with the training set's statistics (mean 0.2860, std 0.3530 over all 60k
// images), the usual Normalize((0.2860,), (0.3530,)) of torchvision recipes.
Tensor prepare_images(const Tensor& images, Device device, bool normalize) {
  Tensor x = images.to(device);
  return normalize ? (x - 0.2860) * (1.0 / 0.3530) : x;
}

// This process's place in a data-parallel run (rank 0 of 1 without mpirun).
struct World {
  int rank = 0, size = 1;
  // Sums `v` over the ranks, in place (float64: exact for the counts evaluation sums).
  void sum(std::vector<double>& v) const {
#if GRAFT_HAVE_DIST
    if (size == 1) return;
    Tensor t = tensor(v, {static_cast<int64_t>(v.size())}, dtype(kFloat64));
    dist::all_reduce(t);
    v = t.to_vector<double>();
#endif
  }
};

// Sharded over the ranks (rank r takes test samples r, r + size, ...), counts summed.
EvalResult evaluate(nn::Module& model, const data::FashionMnist& test, Device device, bool normalize,
                    const World& world = {}) {
  InferenceMode inference;  // no autograd state, no version counters: the cheapest forward
  model.eval();
  auto shard = [&](int64_t) {
    std::vector<int64_t> idx;
    for (int64_t i = world.rank; i < test.size(); i += world.size) idx.push_back(i);
    return idx;
  };
  data::DataLoader loader = world.size == 1 ? data::DataLoader(test, 1000) : data::DataLoader(test, 1000, shard);
  EvalResult r;
  r.confusion.assign(100, 0);
  double loss_sum = 0;
  int64_t correct = 0, n = 0;
  while (auto b = loader.next()) {
    Tensor x = prepare_images(b->images, device, normalize), y = b->labels.to(device);
    Tensor logits = model(x);
    loss_sum += cross_entropy(logits, y, {}, "sum").item<float>();
    auto pred = logits.argmax(1).to_vector<int64_t>();
    auto truth = b->labels.to_vector<int64_t>();
    for (size_t i = 0; i < pred.size(); ++i) {
      correct += pred[i] == truth[i];
      r.confusion[truth[i] * 10 + pred[i]]++;
    }
    n += static_cast<int64_t>(pred.size());
  }
  model.train();
  std::vector<double> sums{loss_sum, static_cast<double>(correct), static_cast<double>(n)};
  for (int64_t c : r.confusion) sums.push_back(static_cast<double>(c));
  world.sum(sums);
  for (size_t i = 0; i < r.confusion.size(); ++i) r.confusion[i] = static_cast<int64_t>(sums[3 + i]);
  r.loss = sums[0] / sums[2];
  r.accuracy = sums[1] / sums[2];
  return r;
}

// Round tick positions over [lo, hi]: a step of 1, 2 or 5 times a power of ten giving at most
// `max_ticks` intervals.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / max_ticks, mag = std::pow(10.0, std::floor(std::log10(raw))), step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

std::string tick_label(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << (std::abs(v) < 1e-12 ? 0.0 : v);
  return os.str();
}

// A self-contained SVG: the training loss per step (left axis) and the test accuracy at the end of
// each epoch (right axis), with round ticks, a grid, dashed epoch boundaries and a legend.
void write_svg(const std::string& path, const std::vector<double>& step_loss, const std::vector<double>& acc) {
  std::ofstream f(path);
  GRAFT_CHECK(f.good(), "train: cannot write ", path);
  const double W = 760, H = 400, L = 60, R = 60, T = 40, B = 50;
  const double steps = std::max<double>(1, static_cast<double>(step_loss.size()));
  const double per_epoch = acc.empty() ? steps : steps / static_cast<double>(acc.size());
  double maxl = 0;
  for (double v : step_loss) maxl = std::max(maxl, v);
  std::vector<double> lticks = nice_ticks(0, maxl > 0 ? maxl : 1, 6);
  double ltop = lticks.back() < maxl ? lticks.back() + (lticks.size() > 1 ? lticks[1] - lticks[0] : 1) : lticks.back();
  if (ltop <= 0) ltop = 1;
  lticks = nice_ticks(0, ltop, 6);
  double amin = 1;
  for (double a : acc) amin = std::min(amin, a);
  double abot = std::max(0.0, std::floor((amin - 0.05) * 10) / 10);  // a whole 10% below the lowest point
  std::vector<double> aticks = nice_ticks(abot, 1.0, 5);
  auto px = [&](double step) { return L + (W - L - R) * step / steps; };
  auto py_loss = [&](double v) { return H - B - (H - T - B) * v / ltop; };
  auto py_acc = [&](double a) { return H - B - (H - T - B) * (a - abot) / (1.0 - abot); };

  f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << L << "\" y=\"20\" font-size=\"14\">graft train: training loss and test accuracy</text>\n";
  // Grid and left ticks (loss).
  for (double t : lticks) {
    double y = py_loss(t);
    f << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << W - R << "\" y2=\"" << y
      << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
      << tick_label(t) << "</text>\n";
  }
  // Right ticks (accuracy).
  for (double t : aticks)
    f << "<text x=\"" << W - R + 6 << "\" y=\"" << py_acc(t) + 4 << "\" fill=\"#c85a00\">" << tick_label(100 * t)
      << "%</text>\n";
  // Bottom ticks (steps) and vertical grid.
  for (double t : nice_ticks(0, steps, 8)) {
    double x = px(t);
    f << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << H - B
      << "\" stroke=\"#f0f0f0\"/>\n<text x=\"" << x << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">"
      << tick_label(t) << "</text>\n";
  }
  // Epoch boundaries.
  for (size_t e = 1; e <= acc.size(); ++e) {
    double x = px(per_epoch * static_cast<double>(e));
    f << "<line class=\"epoch\" x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << H - B
      << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n<text x=\"" << x - 4 << "\" y=\"" << T + 12
      << "\" text-anchor=\"end\" fill=\"#666\">epoch " << e << "</text>\n";
  }
  // Axes and titles.
  f << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << W - R << "\" y1=\"" << T << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">training step</text>\n";
  // Series.
  f << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" points=\"";
  for (size_t i = 0; i < step_loss.size(); ++i) f << px(static_cast<double>(i + 1)) << ',' << py_loss(step_loss[i]) << ' ';
  f << "\"/>\n<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"2\" points=\"";
  for (size_t e = 0; e < acc.size(); ++e) f << px(per_epoch * static_cast<double>(e + 1)) << ',' << py_acc(acc[e]) << ' ';
  f << "\"/>\n";
  for (size_t e = 0; e < acc.size(); ++e)
    f << "<circle cx=\"" << px(per_epoch * static_cast<double>(e + 1)) << "\" cy=\"" << py_acc(acc[e])
      << "\" r=\"3.5\" fill=\"#ff7f0e\"/>\n";
  // Legend, in the title row (the plot area belongs to the data and the epoch labels).
  double lx = W - R - 330, ly = 20;
  f << "<g class=\"legend\"><line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 22 << "\" y2=\"" << ly - 4
    << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" << lx + 28 << "\" y=\"" << ly << "\">training loss (left)</text>\n"
    << "<line x1=\"" << lx + 170 << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 192 << "\" y2=\"" << ly - 4
    << "\" stroke=\"#ff7f0e\" stroke-width=\"2\"/><text x=\"" << lx + 198 << "\" y=\"" << ly
    << "\">test accuracy (right)</text></g>\n</svg>\n";
}

// "16MiB", "512KiB", "1.5GiB", "1000000" (bytes); K/M/G and KB/MB/GB are read as binary units too.
int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    GRAFT_ERROR("--memory-budget: cannot read '", text, "' as a size (for example 16MiB)");
  }
  std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KiB") scale = 1 << 10;
  else if (unit == "M" || unit == "MB" || unit == "MiB") scale = 1 << 20;
  else if (unit == "G" || unit == "GB" || unit == "GiB") scale = 1 << 30;
  GRAFT_CHECK(scale > 0 && v > 0, "--memory-budget: cannot read '", text, "' as a positive size (for example 16MiB)");
  return static_cast<int64_t>(v * scale);
}

Device parse_device(const std::string& d) {
  Device dev(d);
  GRAFT_CHECK(!dev.is_cuda() || cuda_is_available(), "--device ", d,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  return dev;
}

}  // namespace

// The model's forward as one module: the stages plainly, checkpointed, or under a budget plan.
// DDP wraps this, so the parameters are those of the registered model, in its order.
struct TrainForward : nn::Module {
  TrainForward(const models::Model& tm, std::shared_ptr<nn::AutoCheckpoint> budgeted, std::string checkpoint)
      : stages(tm.stages), budgeted(std::move(budgeted)), checkpoint(std::move(checkpoint)) {
    register_module("model", tm.module);
  }
  Tensor forward(const Tensor& x) override { return budgeted ? (*budgeted)(x) : run_model(*stages, x, checkpoint); }
  std::shared_ptr<nn::Sequential> stages;
  std::shared_ptr<nn::AutoCheckpoint> budgeted;
  std::string checkpoint;
};

int train(const TrainOptions& options, const World& world) {
  TrainOptions o = options;
  if (world.rank != 0) {
    // Only rank 0 prints, writes metrics and saves: the others' stdout goes nowhere.
    if (std::freopen("/dev/null", "w", stdout) == nullptr) GRAFT_ERROR("train: cannot silence rank ", world.rank);
    o.save.clear();
    o.metrics.clear();
    o.plot.clear();
    o.graph.clear();
    o.memory_timeline.clear();
  }
  int64_t local_batch = o.batch_size;
  if (world.size > 1) {
    GRAFT_CHECK(o.batch_size % world.size == 0, "train: --batch-size ", o.batch_size,
                " is the global batch and must split evenly over ", world.size, " processes");
    local_batch = o.batch_size / world.size;
    // mpirun --bind-to none: each rank would start a thread per core; share the cores instead.
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      int per_node = local ? std::max(1, std::atoi(local)) : world.size;
      set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / per_node));
    }
  }
  manual_seed(o.seed);
  Device device = parse_device(o.device);
#if GRAFT_HAVE_DIST
  // One GPU per rank: a bare "cuda" means this rank's local GPU (an explicit cuda:N is kept).
  if (world.size > 1 && device.is_cuda() && o.device == "cuda") device = Device(DeviceType::CUDA, dist::local_rank());
#endif
  data::FashionMnist train_set(o.data, true), test_set(o.data, false);
  models::Model tm = models::make_model(models::kind_from_name(o.model));
  auto& model = tm.module;
  model->to(device);
  // CPU convolutions run reorder-free on channels-last activations (ops/conv.cpp).
  if (device.is_cpu()) model->to(MemoryFormat::ChannelsLast);
  auto opt = make_optimizer(o.optimizer, model->parameters(), o.lr, o.weight_decay);
  std::shared_ptr<nn::AutoCheckpoint> budgeted;
  if (!o.memory_budget.empty()) {
    GRAFT_CHECK(o.checkpoint == "none", "train: --memory-budget plans checkpointing itself; drop --checkpoint ",
                o.checkpoint);
    budgeted = std::make_shared<nn::AutoCheckpoint>(tm.stages, parse_bytes(o.memory_budget));
  }
  // Data-parallel: rank r takes samples r, r + size, ... of the epoch's shuffled order, the same
  // order one process would use, so each step's ranks together see one process's batch.
#if GRAFT_HAVE_DIST
  data::DataLoader loader = world.size == 1
      ? data::DataLoader(train_set, o.batch_size, /*shuffle=*/true, /*drop_last=*/false, o.seed)
      : data::DataLoader(train_set, local_batch, dist::DistributedSampler(train_set.size(), true, o.seed), false);
#else
  data::DataLoader loader(train_set, o.batch_size, /*shuffle=*/true, /*drop_last=*/false, o.seed);
#endif
  std::unique_ptr<optim::LRScheduler> sched;
  GRAFT_CHECK(o.warmup_epochs == 0 || o.schedule == "cosine", "train: --warmup-epochs ", o.warmup_epochs,
              " needs --schedule cosine (got ", o.schedule, ")");
  GRAFT_CHECK(o.warmup_epochs < o.epochs || o.warmup_epochs == 0, "train: --warmup-epochs ", o.warmup_epochs,
              " must be fewer than --epochs ", o.epochs);
  if (o.schedule == "cosine" && o.warmup_epochs > 0)
    sched = std::make_unique<optim::WarmupCosineLR>(*opt, o.warmup_epochs * loader.num_batches(),
                                                    o.epochs * loader.num_batches());
  else if (o.schedule == "cosine")
    sched = std::make_unique<optim::CosineAnnealingLR>(*opt, o.epochs * loader.num_batches());
  if (o.schedule == "step") sched = std::make_unique<optim::StepLR>(*opt, loader.num_batches(), 0.1);
  std::ofstream metrics;
  if (!o.metrics.empty()) {
    metrics.open(o.metrics);
    GRAFT_CHECK(metrics.good(), "train: cannot write ", o.metrics);
    metrics << "kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds\n";
  }
  bool tty = isatty(fileno(stderr)) != 0 && world.rank == 0;
  std::string sched_text = o.schedule + " schedule";
  if (o.warmup_epochs > 0) sched_text = std::to_string(o.warmup_epochs) + " warmup epoch(s), then " + sched_text;
  std::string wd_text = o.weight_decay >= 0 ? ", weight decay " + tick_label(o.weight_decay) : "";
  if (world.size > 1)
    std::printf("graft train: data-parallel on %d processes (MPI), batch %lld per process\n", world.size,
                static_cast<long long>(local_batch));
  std::printf("graft train: model %s, %lld epochs, batch %lld, %s lr %g%s (%s), %s inputs, device %s, "
              "checkpoint %s%s, seed %llu\n",
              o.model.c_str(), static_cast<long long>(o.epochs), static_cast<long long>(o.batch_size),
              o.optimizer.c_str(), o.lr, wd_text.c_str(), sched_text.c_str(), o.normalize ? "standardised" : "raw [0,1]", device.str().c_str(), o.checkpoint.c_str(), o.save_on_cpu ? ", save-on-cpu" : "",
              static_cast<unsigned long long>(o.seed));
  // Peak memory of the training steps (evaluation excluded: its batches of 1000 would hide the
  // steps), reported above what exists before the first step (the data set, about 188 MiB as
  // float32, and the model), so the activations' share, which checkpointing cuts, is visible.
  int64_t base_cpu = memory_stats(kCPU).allocated_bytes, train_peak_cpu = 0, train_peak_dev = 0;
  std::vector<double> step_losses, accs;
  int64_t steps = loader.num_batches(), global = 0;
  int planned = 0;
  int64_t predicted_peak = 0;  // the largest of the plans' predictions (one plan per batch shape)
  if (!o.memory_timeline.empty()) {
    // One step per mode on the first batch, before training; parameters, grads and the random
    // stream are left as they were.
    auto b = loader.next();
    GRAFT_CHECK(b.has_value(), "train: --memory-timeline needs at least one batch");
    Tensor x = prepare_images(b->images, device, o.normalize), y = b->labels.to(device);
    std::vector<std::pair<std::string, std::function<Tensor()>>> modes;
    modes.emplace_back("plain", [&] { return run_model(*tm.stages, x, "none"); });
    if (o.checkpoint != "none") modes.emplace_back("checkpoint " + o.checkpoint, [&] { return run_model(*tm.stages, x, o.checkpoint); });
    if (budgeted) modes.emplace_back("budget " + o.memory_budget, [&] { return (*budgeted)(x); });
    std::vector<train::TimelineSeries> series;
    Generator& gen = default_generator(device);
    RngState rng = gen.get_state();
    for (auto& [label, forward] : modes) {
      if (label.rfind("budget", 0) == 0) cross_entropy(forward(), y).backward();  // plans outside the log
      for (Tensor& p : model->parameters()) p.mutable_grad() = Tensor();
      gen.set_state(rng);
      series.push_back(train::record_timeline(label, device, [&] { cross_entropy(forward(), y).backward(); }));
    }
    for (Tensor& p : model->parameters()) p.mutable_grad() = Tensor();
    gen.set_state(rng);
    loader.set_epoch(0);  // the epoch loop starts the loader over
    train::write_memory_timeline(o.memory_timeline, series);
    std::printf("wrote the memory timeline of one step (%zu modes) to %s\n", series.size(), o.memory_timeline.c_str());
  }
  auto forward_module = std::make_shared<TrainForward>(tm, budgeted, o.checkpoint);
  std::shared_ptr<nn::Module> forward = forward_module;
#if GRAFT_HAVE_DIST
  // After the memory timeline (rank 0's own steps); the optimizer keeps its parameters, which
  // DDP overwrites in place with rank 0's.
  if (world.size > 1)
    forward = std::make_shared<dist::DistributedDataParallel>(forward_module,
                                                              dist::DDPOptions{.poll_during_backward = o.ddp_poll});
#endif
  OpProfiler profiler;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    auto t0 = clk::now();
    double loss_sum = 0;
    int64_t seen = 0, step = 0;
    loader.set_epoch(epoch);
    reset_peak_memory_stats(kCPU);
    if (device.is_cuda()) reset_peak_memory_stats(device);
    std::optional<OpProfiler::Scope> profiling;
    if (o.profile) profiling.emplace(profiler);
    while (auto b = loader.next()) {
      Tensor x = prepare_images(b->images, device, o.normalize), y = b->labels.to(device);
      Tensor loss;
      {
        std::unique_ptr<autograd::SaveOnCpu> keep_on_cpu;
        if (o.save_on_cpu) keep_on_cpu = std::make_unique<autograd::SaveOnCpu>(device.is_cuda());
        loss = cross_entropy((*forward)(x), y);
        if (budgeted && budgeted->replans() > planned) {
          planned = budgeted->replans();
          predicted_peak = std::max(predicted_peak, budgeted->plan().predicted_peak_bytes);
          std::printf("%s", budgeted->plan().table().c_str());
        }
      }
      if (global == 0 && !o.graph.empty()) {
        std::ofstream dot(o.graph);
        GRAFT_CHECK(dot.good(), "train: cannot write ", o.graph);
        dot << autograd::to_dot({loss}, model->named_parameters().items());
        std::printf("wrote the first step's backward graph to %s (render: dot -Tsvg %s -o graph.svg)\n",
                    o.graph.c_str(), o.graph.c_str());
      }
      opt->zero_grad();
      loss.backward();
      opt->step();
      if (sched) sched->step();
      double l = loss.item<float>();
      loss_sum += l * static_cast<double>(b->labels.size(0));
      seen += b->labels.size(0);
      ++step;
      ++global;
      step_losses.push_back(l);
      double el = seconds_since(t0), sps = static_cast<double>(seen) / el;
      double eta = el / static_cast<double>(step) * static_cast<double>(steps - step);
      if (metrics.is_open()) metrics << "step," << epoch + 1 << ',' << global << ',' << l << ",,," << sps << ',' << el << '\n';
      if (tty) {
        int width = 30, filled = static_cast<int>(width * step / steps);
        std::fprintf(stderr, "\repoch %lld/%lld [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %.0fs ",
                     static_cast<long long>(epoch + 1), static_cast<long long>(o.epochs), std::string(filled, '#').c_str(),
                     std::string(width - filled, '.').c_str(), static_cast<long long>(step), static_cast<long long>(steps),
                     l, sps, eta);
      } else if (world.rank == 0 && (step % 100 == 0 || step == steps)) {
        std::fprintf(stderr, "epoch %lld/%lld step %lld/%lld loss %.4f %.0f samples/s ETA %.0fs\n",
                     static_cast<long long>(epoch + 1), static_cast<long long>(o.epochs), static_cast<long long>(step),
                     static_cast<long long>(steps), l, sps, eta);
      }
    }
    if (tty) std::fprintf(stderr, "\n");
    profiling.reset();
    double train_time = seconds_since(t0);
    train_peak_cpu = std::max(train_peak_cpu, memory_stats(kCPU).peak_allocated_bytes);
    if (device.is_cuda()) train_peak_dev = std::max(train_peak_dev, memory_stats(device).peak_allocated_bytes);
    std::vector<double> train_sums{loss_sum, static_cast<double>(seen)};
    world.sum(train_sums);  // the train loss over every rank's samples
    loss_sum = train_sums[0];
    seen = static_cast<int64_t>(train_sums[1]);
    EvalResult ev = evaluate(*model, test_set, device, o.normalize, world);
    accs.push_back(ev.accuracy);
    std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.1f s\n",
                static_cast<long long>(epoch + 1), loss_sum / static_cast<double>(seen), ev.loss, 100 * ev.accuracy,
                train_time);
    std::fflush(stdout);
    if (metrics.is_open())
      metrics << "epoch," << epoch + 1 << ',' << global << ',' << loss_sum / static_cast<double>(seen) << ','
              << ev.loss << ',' << ev.accuracy << ',' << static_cast<double>(seen) / train_time << ',' << train_time << '\n';
  }
  if (o.profile)
    std::printf("\nops of the training steps (batches, forward, backward, optimizer; evaluation excluded), %lld "
                "epoch(s):\n%s\n", static_cast<long long>(o.epochs), profiler.table().c_str());
  std::printf("peak memory while training: %.1f MiB allocated on cpu, %.1f MiB above the data set and model",
              static_cast<double>(train_peak_cpu) / (1 << 20), static_cast<double>(train_peak_cpu - base_cpu) / (1 << 20));
  if (budgeted)
    std::printf(" (the plans predicted at most %.1f MiB of activations; the rest is gradients and optimizer state)",
                static_cast<double>(predicted_peak) / (1 << 20));
  if (device.is_cuda())
    std::printf(", %.1f MiB on %s", static_cast<double>(train_peak_dev) / (1 << 20),
                device.str().c_str());
  std::printf("\n");
#if GRAFT_HAVE_DIST
  if (auto* ddp = dynamic_cast<dist::DistributedDataParallel*>(forward.get())) {
    const auto& st = ddp->stats();
    const double steps_done = static_cast<double>(std::max<int64_t>(1, st.steps));
    std::printf("data-parallel: %zu bucket(s), %.2f MiB all-reduced per step, %.0f%% of it launched before backward "
                "ended (%.3f ms ahead of the end per step, summed over buckets), exposed wait %.3f ms per step "
                "(polling %s), %.2f MiB of bucket buffers\n",
                ddp->buckets().size(), static_cast<double>(st.bytes_per_step) / (1 << 20),
                st.bytes_launched_total ? 100.0 * static_cast<double>(st.bytes_launched_in_backward) /
                                              static_cast<double>(st.bytes_launched_total)
                                        : 0.0,
                st.total_launch_lead_ms / steps_done, st.total_exposed_wait_ms / steps_done, o.ddp_poll ? "on" : "off",
                static_cast<double>(st.bucket_buffer_bytes) / (1 << 20));
  }
#endif
  if (!o.save.empty()) {
    model->to(kCPU);
    nn::save(*model, o.save);
    std::printf("saved %s\n", o.save.c_str());
  }
  if (!o.plot.empty()) write_svg(o.plot, step_losses, accs);
  return 0;
}

int run_train(const TrainOptions& options) {
  World world;
#if GRAFT_HAVE_DIST
  if (dist::launched_by_mpi()) {
    dist::init();
    world.rank = dist::rank();
    world.size = dist::world_size();
  }
  try {
    return train(options, world);
  } catch (const std::exception& e) {
    if (world.size == 1) throw;
    // A rank that stops must take the others with it: they would wait in the next all-reduce.
    std::fprintf(stderr, "graft: error on rank %d of %d: %s\n", world.rank, world.size, e.what());
    std::fflush(stderr);
    dist::abort(1);
  }
#else
  return train(options, world);
#endif
}

int run_eval(const std::string& model_name, const std::string& path, const std::string& data_dir, const std::string& dev,
             bool normalize) {
  Device device = parse_device(dev);
  auto model = models::make_model(models::kind_from_name(model_name)).module;
  nn::load(*model, path);
  model->to(device);
  if (device.is_cpu()) model->to(MemoryFormat::ChannelsLast);
  data::FashionMnist test_set(data_dir, false);
  EvalResult ev = evaluate(*model, test_set, device, normalize);
  std::printf("test loss %.4f, test accuracy %.2f%%\n\nconfusion matrix (rows: true class, columns: predicted)\n",
              ev.loss, 100 * ev.accuracy);
  // Full class names ("T-shirt/top" used to be cut to ten characters), padded to the longest.
  const auto& names = data::FashionMnist::class_names();
  int width = 0;
  for (const auto& n : names) width = std::max(width, static_cast<int>(n.size()));
  std::printf("%*s", width + 2, "");
  for (int j = 0; j < 10; ++j) std::printf("%6d", j);
  std::printf("\n");
  for (int i = 0; i < 10; ++i) {
    std::printf("%d %-*s", i, width, names[i].c_str());
    for (int j = 0; j < 10; ++j) std::printf("%6lld", static_cast<long long>(ev.confusion[i * 10 + j]));
    std::printf("\n");
  }
  return 0;
}

}  // namespace graft::tools
