#pragma once
// The workloads of `graft bench` (see graft_workloads.cpp).
#include <string>
#include <vector>

#include "tools/bench/bench_stats.h"

namespace graft_bench {

struct Workload {
  std::string name;
  std::vector<Figure> (*run)(int repeat);
  int default_repeat;
};

const std::vector<Workload>& workloads();

}  // namespace graft_bench
