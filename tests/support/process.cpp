#include "support/process.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace graft::test {

namespace {

using Clock = std::chrono::steady_clock;

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ProcessResult run_process(const std::string& command, RunOptions options) {
  int out_pipe[2], err_pipe[2];
  REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(options.merge_stderr ? out_pipe[1] : err_pipe[1], STDERR_FILENO);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: the child may not have run yet when a kill is due
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  ProcessResult r;
  const auto deadline = Clock::now() + std::chrono::duration<double>(options.timeout_s);
  auto ms_left = [&] {
    return static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  };
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sink[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0 && !r.timed_out) {
    int n = ::poll(fds, 2, ms_left());
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n >= 0);
    if (n == 0) {
      r.timed_out = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sink[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (!r.timed_out) {  // the output is closed; the child may still be exiting
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (ms_left() == 0) r.timed_out = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.timed_out) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    for (auto& f : fds)
      if (f.fd >= 0) ::close(f.fd);
    FAIL_CHECK("run_process: killed after " << options.timeout_s << " s: " << command << "\n  output so far:\n"
                                            << r.out << r.err);
  }
  r.exit_code = r.timed_out ? -1 : exit_code_of(status);
  return r;
}

std::string graft_exe() {
  const char* exe = std::getenv("GRAFT_EXE");
  INFO("meson sets GRAFT_EXE for the tests that run the graft CLI");
  REQUIRE(exe != nullptr);
  return exe;
}

ProcessResult run_graft(const std::string& args, RunOptions options) {
  return run_process(graft_exe() + " " + args, options);
}

}  // namespace graft::test
