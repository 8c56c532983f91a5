#include "tools/dist_launch.h"

#if GRAFT_HAVE_DIST
#include "dist/dist.h"
#endif

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace graft::tools {

bool launched_by_mpirun() {
#if GRAFT_HAVE_DIST
  return dist::launched_by_mpi();
#else
  return false;
#endif
}

int relaunch_under_mpirun(int nproc, int argc, char** argv) {
#if !GRAFT_HAVE_DIST
  std::fprintf(stderr, "graft: error: --nproc %d: this graft was built without the dist component (Open MPI was not "
               "found; install libopenmpi-dev and rebuild)\n", nproc);
  return 1;
#endif
  std::vector<std::string> args{"mpirun", "-np", std::to_string(nproc), "--bind-to", "none"};
  if (static_cast<unsigned>(nproc) > std::max(1u, std::thread::hardware_concurrency())) args.push_back("--oversubscribe");
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  // The ranks run this very binary (by absolute path: mpirun's PATH may differ from the shell's).
  char self[4096] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  args.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    args.push_back(a);
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  execvp("mpirun", cargs.data());
  std::fprintf(stderr, "graft: error: --nproc %d: cannot run mpirun (%s); install openmpi-bin\n", nproc,
               std::strerror(errno));
  return 1;
}

}  // namespace graft::tools
