#pragma once
// One function per `graft` subcommand; graft_main.cpp wires them to CLI11.
namespace graft::tools {

int run_info();
int run_demo();

}  // namespace graft::tools
