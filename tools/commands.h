#pragma once
// One function per `graft` subcommand; graft_main.cpp wires them to CLI11.
#include <string>

namespace graft::tools {

int run_info();
int run_demo();
int run_bench(const std::string& filter, int repeat, const std::string& json, int threads);

}  // namespace graft::tools
