// The `graft` command-line program.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "runtime/error.h"
#include "tools/commands.h"
#include "tools/dist_launch.h"

namespace {

// CLI11's PositiveNumber prints its bound as a 309-digit double ("not in range 0.000000 to
// 179769313486231570814527..."); these say what is wanted in words.
CLI::Validator positive_int() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(s.c_str(), &end, 10);
        if (end == s.c_str() || *end != '\0' || errno == ERANGE || v < 1)
          return "expected a whole number of at least 1, got " + s;
        return {};
      },
      "");
}

CLI::Validator positive_real() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0)
          return "expected a number above 0, got " + s;
        return {};
      },
      "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graft: a small deep-learning framework in C++20"};
  app.require_subcommand(1);
  auto* info = app.add_subcommand("info", "Version, build, devices, library versions and threads");
  auto* demo = app.add_subcommand("demo", "A short tour of the tensor runtime");
  auto* bench = app.add_subcommand("bench", "Time the benchmark workloads (name value unit, median of repeats)");
  graft::tools::BenchOptions bo;
  bench->add_option("--filter", bo.filter, "Regex over workload names (engine, mlp, cnn, matmul1024, matmul4096, elementwise_add, stream_triad, deep_mlp, deep_mlp_budget, deep_mlp_disk, alloc_churn, train_epoch, train_epoch_ddp, sdpa_*, vit, eval)");
  bench->add_option("--repeat", bo.repeat, "Timed repeats per workload (default: per workload)")->check(positive_int());
  bench->add_option("--json", bo.json, "Also write the figures as JSON to this path");
  bench->add_option("--threads", bo.threads, "Intra-op threads (default: all cores)")->check(positive_int());
  bench->add_flag("--profile", bo.profile,
                  "Print a per-op table (calls, total ms, mean us, share of the time) after each workload; its "
                  "figures then include the profiler's cost");
  bench->add_flag("--contended", bo.contended,
                  "Run each workload idle, then again next to one busy process per two cores (CPU-bound loops), "
                  "and print both figures and their ratio");
  bench->add_option("--memory-timeline", bo.memory_timeline,
                    "Also draw the bytes allocated over one step of each matched workload's modes (deep_mlp_budget: "
                    "plain, checkpoint_sequential, the 25% budget plan, all on disk) to this SVG");
  bench->add_option("--device", bo.device,
                    "cpu or cuda[:N]; cuda adds matmul4096 (fp32, tf32) and alloc_churn, drops matmul1024")
      ->capture_default_str();
  graft::tools::TrainOptions to;
  auto* train = app.add_subcommand("train", "Train a model on Fashion-MNIST");
  train->add_option("--model", to.model,
                    "mlp, cnn or vit (vit: patch 7, dim 64, depth 6, 4 heads, MLP 128, CLS, pre-norm; its recipe, "
                    "for flags not given: adamw, lr 2e-3, weight decay 0.05, 1 warmup epoch, then cosine)")
      ->check(CLI::IsMember({"mlp", "cnn", "vit"}))->capture_default_str();
  train->add_option("--epochs", to.epochs, "Epochs")->check(positive_int())->capture_default_str();
  train->add_option("--batch-size", to.batch_size, "Batch size")->check(positive_int())->capture_default_str();
  train->add_option("--lr", to.lr, "Learning rate")->check(positive_real())->capture_default_str();
  train->add_option("--optimizer", to.optimizer, "sgd (momentum 0.9), adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))->capture_default_str();
  train->add_option("--device", to.device, "cpu or cuda[:N]")->capture_default_str();
  train->add_option("--checkpoint", to.checkpoint, "Activation checkpointing: none, sqrt or nested")
      ->check(CLI::IsMember({"none", "sqrt", "nested"}))->capture_default_str();
  train->add_option("--schedule", to.schedule, "Learning-rate schedule per step: none, cosine (to 0 over the run) or step (x0.1 each epoch)")
      ->check(CLI::IsMember({"none", "cosine", "step"}))->capture_default_str();
  train->add_option("--weight-decay", to.weight_decay, "Weight decay (default: the optimizer's: 0, or 0.01 for adamw)")
      ->check(CLI::Range(0.0, 1e9));
  train->add_option("--warmup-epochs", to.warmup_epochs, "Epochs of linear learning-rate warmup before the cosine schedule")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  train->add_flag("--normalize,!--no-normalize", to.normalize,
                  "Standardise pixels with the training set's mean and std (0.2860, 0.3530); on by default");
  train->add_option("--memory-budget", to.memory_budget,
                    "Activation memory budget per step, e.g. 16MiB: an automatic checkpoint plan fits it "
                    "(replaces --checkpoint)");
  train->add_option("--memory-timeline", to.memory_timeline,
                    "Write an SVG of the memory allocated during one step: plain, the --checkpoint mode and the "
                    "--memory-budget plan on one chart");
  train->add_flag("--profile", to.profile,
                  "Print a per-op table (calls, total ms, mean us, share of the time) of the training steps");
  train->add_flag("--save-on-cpu", to.save_on_cpu, "Keep saved activations on the CPU (SaveOnCpu)");
  train->add_option("--seed", to.seed, "Random seed")->capture_default_str();
  train->add_option("--save", to.save, "Write the trained weights (safetensors)");
  train->add_option("--metrics", to.metrics, "Write per-step and per-epoch metrics as CSV");
  train->add_option("--plot", to.plot, "Write an SVG chart of loss and accuracy");
  train->add_option("--graph", to.graph, "Write the first step's backward graph as Graphviz DOT (dot -Tsvg to draw it)");
  train->add_flag("--ddp-poll,!--no-ddp-poll", to.ddp_poll,
                  "Data-parallel: poll the in-flight all-reduces during backward (on by default; off measures the "
                  "wait Open MPI's missing progress thread causes)");
  int nproc = 1;
  train->add_option("--nproc", nproc,
                    "Train data-parallel on N processes: runs this command under mpirun -np N (--batch-size stays "
                    "the global batch)")
      ->check(positive_int());
  train->add_option("--data", to.data, "Fashion-MNIST directory (IDX .gz files)")->capture_default_str();
  std::string eval_model = "mlp", eval_load, eval_data = to.data, eval_device = "cpu";
  auto* eval = app.add_subcommand("eval", "Evaluate saved weights on the Fashion-MNIST test set");
  eval->add_option("--model", eval_model, "mlp, cnn or vit")->check(CLI::IsMember({"mlp", "cnn", "vit"}))->capture_default_str();
  eval->add_option("--load", eval_load, "Weights written by graft train --save")->required();
  eval->add_option("--data", eval_data, "Fashion-MNIST directory")->capture_default_str();
  eval->add_option("--device", eval_device, "cpu or cuda[:N]")->capture_default_str();
  bool eval_normalize = true;
  eval->add_flag("--normalize,!--no-normalize", eval_normalize,
                 "Standardise pixels as graft train does (give --no-normalize if it trained with it)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its message (or the help); any bad flag or value exits with 2, as usual for CLIs.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*info) return graft::tools::run_info();
    if (*demo) return graft::tools::run_demo();
    if (*train) {
      if (to.model == "vit") {  // the ViT recipe, for what the command line leaves open
        if (train->count("--optimizer") == 0) to.optimizer = "adamw";
        if (train->count("--lr") == 0) to.lr = 2e-3;
        if (train->count("--weight-decay") == 0) to.weight_decay = 0.05;
        if (train->count("--warmup-epochs") == 0 && to.epochs > 1) to.warmup_epochs = 1;
      }
      if (nproc > 1 && !graft::tools::launched_by_mpirun()) return graft::tools::relaunch_under_mpirun(nproc, argc, argv);
      return graft::tools::run_train(to);
    }
    if (*eval) return graft::tools::run_eval(eval_model, eval_load, eval_data, eval_device, eval_normalize);
    if (*bench) return graft::tools::run_bench(bo);
  } catch (const graft::Error& e) {
    std::cerr << "graft: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
