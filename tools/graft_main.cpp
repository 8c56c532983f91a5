// The `graft` command-line program: each subcommand's flags and code are in its cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <iostream>
#include <vector>

#include "runtime/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"graft: a small deep-learning framework in C++20"};
  app.require_subcommand(1);
  namespace t = graft::tools;
  const std::vector<t::Command> commands{t::add_info_command(app), t::add_demo_command(app), t::add_bench_command(app),
                                         t::add_train_command(app, argc, argv), t::add_eval_command(app),
                                         t::add_generate_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its message (or the help); any bad flag or value exits with 2, as usual for CLIs.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const t::Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const graft::Error& e) {
    std::cerr << "graft: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
