#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

// Runs the real `graft bench` binary (path from GRAFT_EXE) and checks the shape of its output.
// Timings are never checked: they belong to benchmarks, not tests.
namespace {
std::string run(const std::string& cmd, int& status) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(p);
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  status = pclose(p.release());
  return out;
}
}  // namespace

TEST_CASE("graft bench prints the engine figure as a name value unit line") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter engine --repeat 1", status);
  CHECK(status == 0);
  INFO(out);
  CHECK(out.rfind("engine_us_per_op ", 0) == 0);
  CHECK(out.find(" us (min ") != std::string::npos);
  CHECK(out.find("n=1)") != std::string::npos);
  CHECK(out.find("mlp_step_ms") == std::string::npos);  // the filter selected only the engine
}

TEST_CASE("graft bench rejects a filter that matches nothing") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter no_such_workload --repeat 1 2>&1", status);
  CHECK(status != 0);
  CHECK(out.find("no workload matches") != std::string::npos);
}

TEST_CASE("graft bench --profile prints a per-op table after the workload") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter '^mlp$' --repeat 1 --profile", status);
  CHECK(status == 0);
  INFO(out);
  CHECK(out.find("mlp_step_ms ") != std::string::npos);
  CHECK(out.find("ops of mlp") != std::string::npos);
  for (const char* col : {"calls", "total ms", "mean us", "% time"}) CHECK(out.find(col) != std::string::npos);
  // The step's matmuls, its loss and its optimizer update all show up by op name.
  CHECK(out.find("\nlinear ") != std::string::npos);
  CHECK(out.find("\n_fused_sgd_ ") != std::string::npos);
  CHECK(out.find("(outside ops)") != std::string::npos);
  CHECK(out.find("\ntotal ") != std::string::npos);
}

TEST_CASE("graft bench --contended runs each workload idle and next to busy processes") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter engine --repeat 1 --contended", status);
  CHECK(status == 0);
  INFO(out);
  CHECK(out.rfind("engine_us_per_op ", 0) == 0);
  CHECK(out.find("\nengine_us_per_op_contended ") != std::string::npos);
  CHECK(out.find("engine_us_per_op slowdown ") != std::string::npos);
  CHECK((out.find("next to 1 busy process") != std::string::npos || out.find("busy processes") != std::string::npos));
}

TEST_CASE("GRAFT_CONTENTION=fixed turns the contention monitor off, and graft info says which policy runs") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string adapt = run("env -u GRAFT_CONTENTION " + std::string(exe) + " info", status);
  CHECK(status == 0);
  INFO(adapt);
  CHECK(adapt.find("one thread while other processes keep the cores busy") != std::string::npos);
  std::string fixed = run("GRAFT_CONTENTION=fixed " + std::string(exe) + " info", status);
  CHECK(status == 0);
  INFO(fixed);
  CHECK(fixed.find("(fixed: GRAFT_CONTENTION=fixed)") != std::string::npos);
}

TEST_CASE("graft bench runs the attention and ViT workloads") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter '^(sdpa_L16|vit)$' --repeat 1", status);
  CHECK(status == 0);
  INFO(out);
  CHECK(out.find("sdpa_L16_ms ") != std::string::npos);
  CHECK(out.find("vit_step_ms ") != std::string::npos);
  CHECK(out.find("sdpa_L64_ms") == std::string::npos);
}
