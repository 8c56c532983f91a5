#include <catch2/catch.hpp>

#include <map>

#include "graft.h"

using namespace graft;

namespace {
std::map<std::string, int64_t> calls_by_name(const OpProfiler& p) {
  std::map<std::string, int64_t> m;
  for (const auto& r : p.rows()) m[r.name] = r.calls;
  return m;
}
}  // namespace

TEST_CASE("OpProfiler counts every dispatched op by its full name, forward and backward") {
  Tensor x = randn({3, 4}, TensorOptions{}.requires_grad());
  OpProfiler prof;
  {
    OpProfiler::Scope on(prof);
    Tensor y = (x * 2.0 + 1.0).sum();
    y.backward();
  }
  auto calls = calls_by_name(prof);
  INFO(prof.table());
  CHECK(calls["mul.Scalar"] >= 1);
  CHECK(calls["add.Scalar"] == 1);
  CHECK(calls["sum"] >= 1);
  CHECK(prof.profiled_us() > 0);
  CHECK(prof.ops_us() <= prof.profiled_us());
  for (const auto& r : prof.rows()) {
    CHECK(r.calls > 0);
    CHECK(r.total_us >= 0);
  }
  // Rows come largest total first.
  auto rows = prof.rows();
  for (size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].total_us >= rows[i].total_us);
}

TEST_CASE("OpProfiler sees nothing outside its scopes and accumulates across scopes") {
  Tensor a = ones({4}), b = ones({4});
  OpProfiler prof;
  Tensor c = a + b;  // before any scope: not counted
  {
    OpProfiler::Scope on(prof);
    c = a + b;
  }
  c = a + b;  // after: not counted
  CHECK(calls_by_name(prof)["add.Tensor"] == 1);
  {
    OpProfiler::Scope on(prof);
    c = a + b;
    c = a + b;
  }
  CHECK(calls_by_name(prof)["add.Tensor"] == 3);
  CHECK(dispatch_mode_depth() == 0);
  prof.reset();
  CHECK(prof.rows().empty());
  CHECK(prof.profiled_us() == 0);
}

TEST_CASE("OpProfiler counts an op that throws, and its scope ends cleanly") {
  OpProfiler prof;
  {
    OpProfiler::Scope on(prof);
    CHECK_THROWS_WITH(ops::mm(ones({2, 3}), ones({4, 5})), Catch::Contains("mm"));
  }
  CHECK(dispatch_mode_depth() == 0);
  CHECK(calls_by_name(prof)["mm"] == 1);
}

TEST_CASE("OpProfiler's table lists ops, folds the tail and ends with outside-ops and total") {
  OpProfiler prof;
  {
    OpProfiler::Scope on(prof);
    Tensor a = ones({8});
    Tensor b = a + a;
    b = b * a;
    b = b.exp();
    b = b.sum();
  }
  std::string full = prof.table(100), short_table = prof.table(2);
  INFO(full);
  CHECK(full.find("calls") != std::string::npos);
  CHECK(full.find("\nadd.Tensor ") != std::string::npos);
  CHECK(full.find("\nexp ") != std::string::npos);
  CHECK(full.find("(outside ops)") != std::string::npos);
  CHECK(full.find("\ntotal ") != std::string::npos);
  CHECK(short_table.find("more ops)") != std::string::npos);
}
