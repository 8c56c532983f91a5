// Built outside the project against the installed headers and graft-dist.pc, as a user would:
//   g++ -std=c++20 outside_dist_program.cpp $(pkg-config --cflags --libs graft-dist) -Wl,-rpath,LIBDIR
// Only libgraft_dist.so's own RUNPATH lets the loader find libgraft.so next to it when the
// program does not name libgraft's directory itself.
#include <graft/dist/distributed_sampler.h>

#include <iostream>
#include <vector>

int main() {
  // No MPI launch needed: 2 replicas given explicitly, this is rank 1, no shuffle.
  graft::dist::DistributedSampler sampler(10, 2, 1, /*shuffle=*/false);
  std::vector<int64_t> got = sampler.indices();
  bool ok = got == std::vector<int64_t>{1, 3, 5, 7, 9};
  std::cout << (ok ? "outside dist program: ok" : "outside dist program: WRONG INDICES") << '\n';
  return ok ? 0 : 1;
}
