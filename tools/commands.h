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
  bool ddp_poll = true;  // data-parallel: poll in-flight all-reduces during backward (DDPOptions)
  bool profile = false;  // print a per-op table (calls, total, mean) of the training steps
  std::string schedule = "cosine";
  int64_t warmup_epochs = 0;  // linear warmup before the cosine schedule
  double weight_decay = -1;   // < 0: the optimizer's default
  bool normalize = true;
  uint64_t seed = 0;
  std::string save, metrics, plot;
  std::string graph;  // DOT file of the first step's backward graph
  std::string data = "/usr/share/datasets/fashion-mnist";
};
int run_train(const TrainOptions& options);
int run_eval(const std::string& model, const std::string& path, const std::string& data_dir, const std::string& device,
             bool normalize);
struct BenchOptions {
  std::string filter = ".*";
  int repeat = 0;        // timed repeats per workload; 0: the workload's default
  std::string json;      // also write the figures as JSON here
  int threads = 0;       // intra-op threads; 0: all cores
  std::string device = "cpu";  // "cpu" or "cuda[:N]"; each device runs the workloads that exist for it
  std::string memory_timeline;  // also draw one logged step of each matched workload's modes (SVG)
  bool profile = false;  // print a per-op table (calls, total, mean) after each matched workload
  bool contended = false;  // run each workload idle, then next to busy processes; print both and the ratio
};
int run_bench(const BenchOptions& options);

}  // namespace graft::tools
