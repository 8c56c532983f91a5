#include "dist/mpi_process_group.h"

#include <mpi.h>

#include <atomic>
#include <climits>

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::dist {

namespace {

std::atomic<int64_t> g_mpi_calls{0};

MPI_Datatype mpi_type(const Tensor& t, const char* api) {
  switch (t.dtype()) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int32: return MPI_INT32_T;
    default: GRAFT_ERROR(api, ": no MPI datatype for ", describe(t));
  }
}

MPI_Op mpi_op(const Tensor& t, ReduceOp op) {
  if (t.dtype() == DType::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;  // or = sum/max of flags
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

void check_cpu(const Tensor& t, const char* api) {
  GRAFT_CHECK(t.defined(), api, ": the tensor is undefined");
  GRAFT_CHECK(t.device().type == DeviceType::CPU, api, ": the MPI process group takes CPU tensors, got ", describe(t),
              " (Open MPI here is not CUDA-aware: CUDA tensors go through NCCL)");
  GRAFT_CHECK(t.numel() <= INT_MAX, api, ": ", describe(t), " has more than INT_MAX elements, MPI's count limit");
}

// One in-flight MPI collective on a contiguous buffer; `target` receives the result when the
// buffer is a staging copy of a non-contiguous tensor.
class MpiWork final : public Work {
 public:
  MpiWork(Tensor target, Tensor buffer, bool average, int size)
      : target_(std::move(target)), buffer_(std::move(buffer)), average_(average), size_(size) {}
  ~MpiWork() override {
    if (!done_) {
      count_mpi_call();
      MPI_Wait(&request_, MPI_STATUS_IGNORE);  // invariant 2 of process_group.h: never free under MPI
    }
  }
  MPI_Request* request() { return &request_; }
  void wait() override {
    if (done_) return;
    mpi_check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    finish();
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    mpi_check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) finish();
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    NoGradGuard no_grad;
    if (average_) buffer_.div_(static_cast<double>(size_));
    if (!buffer_.is_same(target_)) target_.copy_(buffer_);
  }
  Tensor target_, buffer_;
  bool average_ = false;
  int size_ = 1;
  bool done_ = false;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace

void count_mpi_call() { g_mpi_calls.fetch_add(1, std::memory_order_relaxed); }
int64_t mpi_call_count() { return g_mpi_calls.load(std::memory_order_relaxed); }

void mpi_check(int rc, const char* what) {
  count_mpi_call();
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  GRAFT_ERROR(what, " failed: ", std::string(msg, static_cast<size_t>(len)));
}

struct MpiProcessGroup::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

MpiProcessGroup::MpiProcessGroup() : comm_(std::make_unique<Comm>()) {
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_->comm), "MPI_Comm_dup");
  mpi_check(MPI_Comm_rank(comm_->comm, &rank_), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm_->comm, &size_), "MPI_Comm_size");
}

MpiProcessGroup::~MpiProcessGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_->comm != MPI_COMM_NULL) {
    count_mpi_call();
    MPI_Comm_free(&comm_->comm);
  }
}

std::shared_ptr<Work> MpiProcessGroup::all_reduce(Tensor& t, ReduceOp op) {
  check_cpu(t, "all_reduce");
  check_reduce(t, op);
  Tensor buf = t.is_contiguous() ? t : ops::clone(t);
  auto work = std::make_shared<MpiWork>(t, buf, op == ReduceOp::Avg, size_);
  ++num_collectives_;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(t, "all_reduce"),
                           mpi_op(t, op), comm_->comm, work->request()),
            "MPI_Iallreduce");
  return work;
}

std::shared_ptr<Work> MpiProcessGroup::broadcast(Tensor& t, int src) {
  check_cpu(t, "broadcast");
  GRAFT_CHECK(src >= 0 && src < size_, "broadcast: src ", src, " is not a rank of a world of size ", size_);
  Tensor buf = t.is_contiguous() ? t : ops::clone(t);
  auto work = std::make_shared<MpiWork>(t, buf, false, size_);
  ++num_collectives_;
  mpi_check(MPI_Ibcast(buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(t, "broadcast"), src, comm_->comm,
                       work->request()),
            "MPI_Ibcast");
  return work;
}

std::vector<Tensor> MpiProcessGroup::all_gather(const Tensor& t) {
  check_cpu(t, "all_gather");
  Tensor src = t.is_contiguous() ? t : ops::clone(t);
  Shape shape = t.sizes();
  shape.insert(shape.begin(), size_);
  Tensor all = ops::empty(shape, t.dtype(), t.device());
  ++num_collectives_;
  MPI_Datatype type = mpi_type(t, "all_gather");
  mpi_check(MPI_Allgather(src.data_ptr(), static_cast<int>(src.numel()), type, all.data_ptr(),
                          static_cast<int>(src.numel()), type, comm_->comm),
            "MPI_Allgather");
  std::vector<Tensor> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.select(0, r));
  return out;
}

void MpiProcessGroup::barrier() {
  ++num_collectives_;
  mpi_check(MPI_Barrier(comm_->comm), "MPI_Barrier");
}

void MpiProcessGroup::broadcast_bytes(void* data, int bytes, int src) {
  ++num_collectives_;
  mpi_check(MPI_Bcast(data, bytes, MPI_BYTE, src, comm_->comm), "MPI_Bcast");
}

}  // namespace graft::dist
