#pragma once
// One function per `graft` subcommand; graft_main.cpp wires them to CLI11.
#include <cstdint>
#include <string>

namespace graft::tools {

int run_info();
int run_demo();
struct TrainOptions {
  std::string model = "mlp";
  int64_t epochs = 1;
  int64_t batch_size = 128;
  double lr = 1e-3;
  std::string optimizer = "adam";
  std::string device = "cpu";
  std::string checkpoint = "none";
  std::string memory_budget;  // "16MiB": plan checkpointing to fit (nn::AutoCheckpoint); empty: off
  std::string memory_timeline;  // SVG of one step's allocations: plain, --checkpoint's mode, the budget plan
  bool save_on_cpu = false;
  std::string schedule = "cosine";
  bool normalize = true;
  uint64_t seed = 0;
  std::string save, metrics, plot;
  std::string graph;  // DOT file of the first step's backward graph
  std::string data = "/usr/share/datasets/fashion-mnist";
};
int run_train(const TrainOptions& options);
int run_eval(const std::string& model, const std::string& path, const std::string& data_dir, const std::string& device,
             bool normalize);
// device: "cpu" (the default) or "cuda[:N]"; each device runs the workloads that exist for it.
// memory_timeline: also draw one logged step of each matched workload's modes to this SVG.
int run_bench(const std::string& filter, int repeat, const std::string& json, int threads,
              const std::string& device = "cpu", const std::string& memory_timeline = "");

}  // namespace graft::tools
