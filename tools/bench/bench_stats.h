#pragma once
// Shared by `graft bench` and the libtorch reference: repeat a workload, report median and spread,
// print `name value unit` lines that compare.sh can pair up by name.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace graft_bench {

struct Figure {
  std::string name, unit;
  double median = 0, min = 0, max = 0;
  int n = 0;
};

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline Figure summarize(const std::string& name, const std::string& unit, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Figure f{name, unit};
  f.n = static_cast<int>(v.size());
  if (v.empty()) return f;
  f.min = v.front();
  f.max = v.back();
  f.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return f;
}

inline void print_figure(const Figure& f) {
  std::printf("%s %.4g %s (min %.4g, max %.4g, n=%d)\n", f.name.c_str(), f.median, f.unit.c_str(), f.min, f.max, f.n);
  std::fflush(stdout);
}

inline std::string figures_json(const std::vector<Figure>& figs) {
  std::string s = "{\n";
  for (size_t i = 0; i < figs.size(); ++i) {
    const auto& f = figs[i];
    char buf[512];
    std::snprintf(buf, sizeof buf, "  \"%s\": {\"value\": %.6g, \"unit\": \"%s\", \"min\": %.6g, \"max\": %.6g, \"n\": %d}%s\n",
                  f.name.c_str(), f.median, f.unit.c_str(), f.min, f.max, f.n, i + 1 < figs.size() ? "," : "");
    s += buf;
  }
  return s + "}\n";
}

}  // namespace graft_bench
