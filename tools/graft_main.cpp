// The `graft` command-line program.
#include <CLI/CLI.hpp>
#include <iostream>

#include "runtime/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"graft: a small deep-learning framework in C++20"};
  app.require_subcommand(1);
  auto* info = app.add_subcommand("info", "Version, build, devices, library versions and threads");
  auto* demo = app.add_subcommand("demo", "A short tour of the tensor runtime");
  auto* bench = app.add_subcommand("bench", "Time the benchmark workloads (name value unit, median of repeats)");
  std::string filter = ".*", json;
  int repeat = 0, threads = 0;
  bench->add_option("--filter", filter, "Regex over workload names (engine, mlp, cnn, matmul1024, elementwise_add, deep_mlp)");
  bench->add_option("--repeat", repeat, "Timed repeats per workload (default: per workload)");
  bench->add_option("--json", json, "Also write the figures as JSON to this path");
  bench->add_option("--threads", threads, "Intra-op threads (default: all cores)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*info) return graft::tools::run_info();
    if (*demo) return graft::tools::run_demo();
    if (*bench) return graft::tools::run_bench(filter, repeat, json, threads);
  } catch (const graft::Error& e) {
    std::cerr << "graft: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
