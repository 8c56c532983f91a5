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
  CLI11_PARSE(app, argc, argv);
  try {
    if (*info) return graft::tools::run_info();
    if (*demo) return graft::tools::run_demo();
  } catch (const graft::Error& e) {
    std::cerr << "graft: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
