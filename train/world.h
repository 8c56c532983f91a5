#pragma once
// train::World: the processes of a data-parallel run as the trainer sees them.
//
// Core graft never needs MPI: the default is a world of one, whose sum leaves the numbers as they
// are; dist::training_world() (libgraft_dist) gives the MPI one. Every rank must call sum() with
// vectors of the same length at the same points of the run (it is a collective).
#include <functional>
#include <vector>

namespace graft::train {

struct World {
  int rank = 0;
  int size = 1;
  // Sums the vector over the ranks, in place; empty for a world of one.
  std::function<void(std::vector<double>&)> sum_in_place;

  void sum(std::vector<double>& values) const {
    if (sum_in_place) sum_in_place(values);
  }
};

}  // namespace graft::train
