#include <catch2/catch.hpp>

#include <string>

#include "support/process.h"

// Runs the real `graft bench` binary (path from GRAFT_EXE) and checks the shape of its output.
// Timings are never checked: they belong to benchmarks, not tests.
using graft::test::graft_exe;
using graft::test::run_graft;
using graft::test::run_process;

TEST_CASE("graft bench prints the engine figure as a name value unit line") {
  auto r = run_graft("bench --filter engine --repeat 1");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("engine_us_per_op ", 0) == 0);
  CHECK(r.out.find(" us (min ") != std::string::npos);
  CHECK(r.out.find("n=1)") != std::string::npos);
  CHECK(r.out.find("mlp_step_ms") == std::string::npos);  // the filter selected only the engine
}

TEST_CASE("graft bench rejects a filter that matches nothing") {
  auto r = run_graft("bench --filter no_such_workload --repeat 1", {.merge_stderr = true});
  INFO(r.out);
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("no workload matches") != std::string::npos);
}

TEST_CASE("graft bench --profile prints a per-op table after the workload") {
  auto r = run_graft("bench --filter '^mlp$' --repeat 1 --profile");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("mlp_step_ms ") != std::string::npos);
  CHECK(r.out.find("ops of mlp") != std::string::npos);
  for (const char* col : {"calls", "total ms", "mean us", "% time"}) CHECK(r.out.find(col) != std::string::npos);
  // The step's matmuls, its loss and its optimizer update all show up by op name.
  CHECK(r.out.find("\nlinear ") != std::string::npos);
  CHECK(r.out.find("\n_fused_sgd_ ") != std::string::npos);
  CHECK(r.out.find("(outside ops)") != std::string::npos);
  CHECK(r.out.find("\ntotal ") != std::string::npos);
}

TEST_CASE("graft bench --contended runs each workload idle and next to busy processes") {
  auto r = run_graft("bench --filter engine --repeat 1 --contended");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("engine_us_per_op ", 0) == 0);
  CHECK(r.out.find("\nengine_us_per_op_contended ") != std::string::npos);
  CHECK(r.out.find("engine_us_per_op slowdown ") != std::string::npos);
  CHECK(
      (r.out.find("next to 1 busy process") != std::string::npos || r.out.find("busy processes") != std::string::npos));
}

TEST_CASE("GRAFT_CONTENTION=fixed turns the contention monitor off, and graft info says which policy runs") {
  auto adapt = run_process("env -u GRAFT_CONTENTION " + graft_exe() + " info");
  INFO(adapt.out << adapt.err);
  CHECK(adapt.exit_code == 0);
  CHECK(adapt.out.find("one thread while other processes keep the cores busy") != std::string::npos);
  auto fixed = run_process("GRAFT_CONTENTION=fixed " + graft_exe() + " info");
  INFO(fixed.out << fixed.err);
  CHECK(fixed.exit_code == 0);
  CHECK(fixed.out.find("(fixed: GRAFT_CONTENTION=fixed)") != std::string::npos);
}

TEST_CASE("graft bench runs the attention and ViT workloads") {
  auto r = run_graft("bench --filter '^(sdpa_L16|vit)$' --repeat 1");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("sdpa_L16_ms ") != std::string::npos);
  CHECK(r.out.find("vit_step_ms ") != std::string::npos);
  CHECK(r.out.find("sdpa_L64_ms") == std::string::npos);
}
