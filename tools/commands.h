#pragma once
// One function per `graft` subcommand: each adds its subcommand and flags to the CLI11 app and
// returns what runs it; graft_main.cpp runs the one the command line chose. The flags' storage
// lives in the returned function, so it outlives the parse.
#include <functional>

namespace CLI {
class App;
}

namespace graft::tools {

struct Command {
  CLI::App* app = nullptr;   // the subcommand; parsed() tells whether the command line chose it
  std::function<int()> run;  // the exit code
};

Command add_info_command(CLI::App& app);
Command add_demo_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
// argv: `--nproc N` runs the same command line again under mpirun.
Command add_train_command(CLI::App& app, int argc, char** argv);
Command add_eval_command(CLI::App& app);
Command add_generate_command(CLI::App& app);

}  // namespace graft::tools
