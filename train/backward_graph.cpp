#include "train/backward_graph.h"

#include <fstream>

#include "autograd/graph_export.h"
#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

BackwardGraph::BackwardGraph(std::string path, std::FILE* out) : path_(std::move(path)), out_(out) {}

void BackwardGraph::on_before_backward(TrainerState& s) {
  if (s.global_step != 0) return;
  std::ofstream dot(path_);
  GRAFT_CHECK(dot.good(), "train: cannot write ", path_);
  dot << autograd::to_dot({s.loss}, s.model->named_parameters().items());
  std::fprintf(out_, "wrote the first step's backward graph to %s (render: dot -Tsvg %s -o graph.svg)\n", path_.c_str(),
               path_.c_str());
}

}  // namespace graft::train
