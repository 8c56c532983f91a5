// `graft bench`: runs the workloads of tools/bench/graft_workloads.cpp.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>

#include "graft.h"
#include "tools/bench/graft_workloads.h"
#include "tools/commands.h"
#include "tools/memory_timeline.h"

namespace graft::tools {

int run_bench(const std::string& filter, int repeat, const std::string& json, int threads, const std::string& device_spec,
              const std::string& memory_timeline) {
  if (threads > 0) set_num_threads(threads);
  Device device(device_spec);
  GRAFT_CHECK(!device.is_cuda() || cuda_is_available(), "bench: --device ", device_spec,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  std::regex re;
  try {
    re = std::regex(filter);
  } catch (const std::regex_error& e) {
    GRAFT_ERROR("bench: invalid --filter regex '", filter, "': ", e.what());
  }
  std::vector<graft_bench::Figure> all;
  const unsigned on = device.is_cuda() ? graft_bench::kOnCuda : graft_bench::kOnCpu;
  for (const auto& w : graft_bench::workloads()) {
    if (!(w.devices & on) || !std::regex_search(w.name, re)) continue;
    for (auto& f : w.run(repeat > 0 ? repeat : w.default_repeat, device)) {
      graft_bench::print_figure(f);
      all.push_back(f);
    }
  }
  GRAFT_CHECK(!all.empty(), "bench: no workload matches --filter '", filter, "' on ", device);
  if (!memory_timeline.empty()) {
    // One chart of every matched workload's logged steps; workloads sharing a timeline draw it once.
    std::vector<TimelineSeries> series;
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
    write_memory_timeline(memory_timeline, series);
    std::printf("wrote the memory timeline of one step (%zu modes) to %s\n", series.size(), memory_timeline.c_str());
  }
  if (!json.empty()) {
    std::ofstream out(json);
    GRAFT_CHECK(out.good(), "bench: cannot write ", json);
    out << graft_bench::figures_json(all);
  }
  return 0;
}

}  // namespace graft::tools
