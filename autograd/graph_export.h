#pragma once
// Graph export: the backward graph as Graphviz DOT (PyTorch has no built-in equivalent).
//
// One DOT node per backward node reachable from the roots, labelled with its name, each tensor it
// saved (shape, dtype, bytes, and how it is kept: plain, under saved-tensor hooks, as a
// checkpoint placeholder, offloaded by SaveOnCpu, or already freed) and, for a leaf's
// AccumulateGrad, the leaf's shape and parameter name when one is given. Edges follow the
// gradient: from a node to the nodes of its forward inputs. Reading the graph changes nothing:
// no saved tensor is unpacked (checkpoints are not recomputed).
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

// `names`: optional (name, tensor) pairs, e.g. a module's named_parameters(), to label leaves.
std::string to_dot(const std::vector<Tensor>& roots, const std::vector<std::pair<std::string, Tensor>>& names = {});

}  // namespace graft::autograd
