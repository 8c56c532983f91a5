// `graft bench`: runs the workloads of tools/bench/graft_workloads.cpp.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>

#include "graft.h"
#include "tools/bench/graft_workloads.h"
#include "tools/cli_validators.h"
#include "tools/commands.h"
#include "train/memory_timeline_chart.h"

namespace graft::tools {

namespace {

// CPU-bound competitors for --contended: child processes spinning on plain arithmetic until
// killed (and dying with this process if it is killed first). Forked before the workloads run,
// so no OpenMP or allocator state is copied into a child in the middle of use.
class BusyProcesses {
 public:
  explicit BusyProcesses(int n) {
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      GRAFT_CHECK(pid >= 0, "bench: --contended: fork failed");
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile uint64_t x = 1;
        for (;;) x = x * 6364136223846793005ull + 1442695040888963407ull;
      }
      pids_.push_back(pid);
      kill(pid, SIGSTOP);  // parked until resume()
    }
  }
  void resume() {
    for (pid_t p : pids_) kill(p, SIGCONT);
  }
  void pause() {
    for (pid_t p : pids_) kill(p, SIGSTOP);
  }
  ~BusyProcesses() {
    for (pid_t p : pids_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  }
  BusyProcesses(const BusyProcesses&) = delete;
  BusyProcesses& operator=(const BusyProcesses&) = delete;

 private:
  std::vector<pid_t> pids_;
};

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

int run_bench(const BenchOptions& o) {
  const std::string& filter = o.filter;
  const bool profile = o.profile;
  if (o.threads > 0) set_num_threads(o.threads);
  Device device(o.device);
  GRAFT_CHECK(!device.is_cuda() || cuda_is_available(), "bench: --device ", o.device,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  std::regex re;
  try {
    re = std::regex(filter);
  } catch (const std::regex_error& e) {
    GRAFT_ERROR("bench: invalid --filter regex '", filter, "': ", e.what());
  }
  std::vector<graft_bench::Figure> all;
  const unsigned on = device.is_cuda() ? graft_bench::kOnCuda : graft_bench::kOnCpu;
  std::optional<BusyProcesses> busy;
  const int competitors = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN) / 2);
  if (o.contended) busy.emplace(static_cast<int>(competitors));
  const int repeat = o.repeat;
  for (const auto& w : graft_bench::workloads()) {
    if (!(w.devices & on) || !std::regex_search(w.name, re)) continue;
    OpProfiler profiler;
    std::vector<graft_bench::Figure> figs;
    reset_contention_monitor();
    const int64_t reductions_before = contention_state().reductions;
    {
      std::optional<OpProfiler::Scope> on;
      if (profile) on.emplace(profiler);
      figs = w.run(repeat > 0 ? repeat : w.default_repeat, device);
    }
    for (auto& f : figs) {
      graft_bench::print_figure(f);
      all.push_back(f);
    }
    if (busy) {
      // The same workload next to the competitors; "<name>_contended" figures, then the ratios.
      const int64_t idle_reductions = contention_state().reductions - reductions_before;
      reset_contention_monitor();
      busy->resume();
      auto loaded = w.run(repeat > 0 ? repeat : w.default_repeat, device);
      busy->pause();
      std::printf("%s: the contention monitor went to one thread %lld times idle, %lld times contended\n",
                  w.name.c_str(), static_cast<long long>(idle_reductions),
                  static_cast<long long>(contention_state().reductions - reductions_before - idle_reductions));
      for (size_t i = 0; i < loaded.size(); ++i) {
        loaded[i].name += "_contended";
        graft_bench::print_figure(loaded[i]);
        all.push_back(loaded[i]);
        bool rate = loaded[i].unit.find("/s") != std::string::npos;
        double slow = rate ? figs[i].median / loaded[i].median : loaded[i].median / figs[i].median;
        std::printf("%s slowdown %.2fx next to %d busy process%s (time contended / idle)\n", figs[i].name.c_str(),
                    slow, competitors, competitors == 1 ? "" : "es");
      }
    }
    if (!busy && contention_state().reductions > reductions_before)
      std::printf("note: other processes kept graft waiting for a CPU during %s: ops ran on one thread %lld times "
                  "(the figures are not idle ones)\n",
                  w.name.c_str(), static_cast<long long>(contention_state().reductions - reductions_before));
    // The timed figures above include the profiler's cost (about a microsecond per op call).
    if (profile) std::printf("\nops of %s (warm-up and timed repeats):\n%s\n", w.name.c_str(), profiler.table().c_str());
  }
  GRAFT_CHECK(!all.empty(), "bench: no workload matches --filter '", filter, "' on ", device);
  const std::string& memory_timeline = o.memory_timeline;
  if (!memory_timeline.empty()) {
    // One chart of every matched workload's logged steps; workloads sharing a timeline draw it once.
    std::vector<train::TimelineSeries> series;
    std::vector<decltype(graft_bench::Workload::timeline)> drawn;
    std::string with;
    for (const auto& w : graft_bench::workloads()) {
      if (!w.timeline || !(w.devices & on)) continue;
      with += (with.empty() ? "" : ", ") + w.name;
      if (!std::regex_search(w.name, re) || std::find(drawn.begin(), drawn.end(), w.timeline) != drawn.end()) continue;
      drawn.push_back(w.timeline);
      for (auto& s : w.timeline(device)) series.push_back(std::move(s));
    }
    GRAFT_CHECK(!series.empty(), "bench: --memory-timeline: no workload matched by --filter '", filter,
                "' has a memory timeline (those that do: ", with, ")");
    train::write_memory_timeline(memory_timeline, series);
    std::printf("wrote the memory timeline of one step (%zu modes) to %s\n", series.size(), memory_timeline.c_str());
  }
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    GRAFT_CHECK(out.good(), "bench: cannot write ", o.json);
    out << graft_bench::figures_json(all);
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Time the benchmark workloads (name value unit, median of repeats)");
  auto bo = std::make_shared<BenchOptions>();
  bench->add_option("--filter", bo->filter, "Regex over workload names (engine, mlp, cnn, matmul1024, matmul1024_bf16, mlp_bf16, cnn_bf16, cnn_peak, vit_bf16, matmul4096, elementwise_add, stream_triad, deep_mlp, deep_mlp_budget, deep_mlp_disk, alloc_churn, train_epoch, train_epoch_trainer, train_epoch_ddp, sdpa_*, vit, eval)");
  bench->add_option("--repeat", bo->repeat, "Timed repeats per workload (default: per workload)")->check(whole_number_at_least(1));
  bench->add_option("--json", bo->json, "Also write the figures as JSON to this path");
  bench->add_option("--threads", bo->threads, "Intra-op threads (default: all cores)")->check(whole_number_at_least(1));
  bench->add_flag("--profile", bo->profile,
                  "Print a per-op table (calls, total ms, mean us, share of the time) after each workload; its "
                  "figures then include the profiler's cost");
  bench->add_flag("--contended", bo->contended,
                  "Run each workload idle, then again next to one busy process per two cores (CPU-bound loops), "
                  "and print both figures and their ratio");
  bench->add_option("--memory-timeline", bo->memory_timeline,
                    "Also draw the bytes allocated over one step of each matched workload's modes (deep_mlp_budget: "
                    "plain, checkpoint_sequential, the 25% budget plan, all on disk) to this SVG");
  bench->add_option("--device", bo->device,
                    "cpu or cuda[:N]; cuda adds matmul4096 (fp32, tf32) and alloc_churn, drops matmul1024")
      ->capture_default_str();
  return {bench, [bo] { return run_bench(*bo); }};
}

}  // namespace graft::tools
