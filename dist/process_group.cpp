#include "dist/process_group.h"

#include "ops/ops.h"

namespace graft::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void check_reduce(const Tensor& t, ReduceOp op) {
  GRAFT_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), "all_reduce: op avg needs a floating tensor, got ",
              describe(t), " (avg is a sum then a division)");
}

std::shared_ptr<Work> LocalProcessGroup::all_reduce(Tensor& t, ReduceOp op) {
  GRAFT_CHECK(t.defined(), "all_reduce: the tensor is undefined");
  check_reduce(t, op);
  ++num_collectives_;
  return std::make_shared<CompletedWork>();
}

std::shared_ptr<Work> LocalProcessGroup::broadcast(Tensor& t, int src) {
  GRAFT_CHECK(t.defined(), "broadcast: the tensor is undefined");
  GRAFT_CHECK(src == 0, "broadcast: src ", src, " is not a rank of a world of size 1");
  ++num_collectives_;
  return std::make_shared<CompletedWork>();
}

std::vector<Tensor> LocalProcessGroup::all_gather(const Tensor& t) {
  GRAFT_CHECK(t.defined(), "all_gather: the tensor is undefined");
  ++num_collectives_;
  return {ops::clone(t)};
}

}  // namespace graft::dist
