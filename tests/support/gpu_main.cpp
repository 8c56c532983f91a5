// Catch2 main for the tests that need a CUDA device: without one the executable exits with 77,
// which meson reports as SKIPPED (Catch2 v2 has no SKIP macro), instead of passing having run
// nothing. In a build without the CUDA backend meson registers tests/cuda/skip_without_cuda.cpp
// in their place.
#include <iostream>

#include "graft.h"
#include "support/catch_session.h"

int main(int argc, char* argv[]) {
  if (!graft::cuda_is_available()) {
    std::cout << "no CUDA device: skipped\n";
    return 77;
  }
  return graft::test::run_catch_session(argc, argv);
}
