#pragma once
// The workloads of `graft bench` (see graft_workloads.cpp).
#include <string>
#include <vector>

#include "runtime/device.h"
#include "tools/bench/bench_stats.h"
#include "train/memory_timeline_chart.h"

namespace graft_bench {

// Where a workload runs.
enum DeviceMask : unsigned { kOnCpu = 1, kOnCuda = 2, kOnBoth = kOnCpu | kOnCuda };

struct Workload {
  std::string name;
  std::vector<Figure> (*run)(int repeat, graft::Device device);
  int default_repeat;
  unsigned devices = kOnBoth;
  // For `graft bench --memory-timeline`: one logged step per mode of the workload (null: none).
  std::vector<graft::train::TimelineSeries> (*timeline)(graft::Device device) = nullptr;
};

const std::vector<Workload>& workloads();

}  // namespace graft_bench
