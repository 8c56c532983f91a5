#pragma once
// Runs a program the way the tests of the `graft` CLI need: a shell command line, its output and
// exit code captured, and a time limit, so that a hung child fails its test instead of holding
// the suite until meson's timeout (which leaves no output to read).
#include <string>

namespace graft::test {

struct RunOptions {
  bool merge_stderr = false;  // stderr into ProcessResult::out, interleaved as written (2>&1)
  double timeout_s = 240;     // then the child's process group is killed and the run fails a check
};

struct ProcessResult {
  int exit_code = -1;  // the exit status; 128 + N when signal N ended it, as a shell reports it
  bool timed_out = false;
  std::string out;  // stdout (and stderr with RunOptions::merge_stderr)
  std::string err;  // stderr, unless merged
};

// `/bin/sh -c command` in its own process group, with the test's environment.
ProcessResult run_process(const std::string& command, RunOptions options = {});

// The `graft` CLI meson built (GRAFT_EXE, set for the tests that run it); REQUIREs that it is set.
std::string graft_exe();

// `graft <args>` through run_process.
ProcessResult run_graft(const std::string& args, RunOptions options = {});

}  // namespace graft::test
