#include "runtime/op_profiler.h"

#include <algorithm>
#include <cstdio>

namespace graft {

namespace {
double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

OpProfiler::Scope::Scope(OpProfiler& p) : p_(p), guard_(&p), start_(std::chrono::steady_clock::now()) {}

OpProfiler::Scope::~Scope() { p_.wall_us_ += us_since(start_); }

OpResult OpProfiler::on_op(const Op& op, Stack& args, const DispatchNext& next) {
  auto t0 = std::chrono::steady_clock::now();
  // Timed also when the op throws: an error path is still time spent.
  struct Record {
    Row& row;
    std::chrono::steady_clock::time_point t0;
    ~Record() {
      row.calls += 1;
      row.total_us += us_since(t0);
    }
  } rec{rows_[&op], t0};
  if (rec.row.name.empty()) rec.row.name = op.schema.full_name();
  return next(args);
}

std::vector<OpProfiler::Row> OpProfiler::rows() const {
  std::vector<Row> out;
  for (const auto& [name, r] : rows_) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.total_us > b.total_us; });
  return out;
}

double OpProfiler::ops_us() const {
  double s = 0;
  for (const auto& [name, r] : rows_) s += r.total_us;
  return s;
}

std::string OpProfiler::table(size_t max_rows) const {
  auto rs = rows();
  const double wall = wall_us_ > 0 ? wall_us_ : 1;
  std::string out;
  char line[256];
  auto add = [&](const char* name, int64_t calls, double total, bool with_mean) {
    if (with_mean)
      std::snprintf(line, sizeof line, "%-28s %9lld %12.3f %10.2f %7.1f%%\n", name, static_cast<long long>(calls),
                    total / 1000, calls ? total / static_cast<double>(calls) : 0.0, 100 * total / wall);
    else
      std::snprintf(line, sizeof line, "%-28s %9s %12.3f %10s %7.1f%%\n", name, "", total / 1000, "", 100 * total / wall);
    out += line;
  };
  std::snprintf(line, sizeof line, "%-28s %9s %12s %10s %8s\n", "op", "calls", "total ms", "mean us", "% time");
  out += line;
  int64_t rest_calls = 0;
  double rest_us = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i < max_rows) {
      add(rs[i].name.c_str(), rs[i].calls, rs[i].total_us, true);
    } else {
      rest_calls += rs[i].calls;
      rest_us += rs[i].total_us;
    }
  }
  if (rs.size() > max_rows) {
    std::string n = "(" + std::to_string(rs.size() - max_rows) + " more ops)";
    add(n.c_str(), rest_calls, rest_us, true);
  }
  add("(outside ops)", 0, std::max(0.0, wall_us_ - ops_us()), false);
  add("total", 0, wall_us_, false);
  return out;
}

void OpProfiler::reset() {
  rows_.clear();
  wall_us_ = 0;
}

}  // namespace graft
