#include "dist/nccl_process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <exception>
#include <mutex>
#include <string>

#include "autograd/grad_mode.h"
#include "cuda/cuda_allocator.h"
#include "cuda/cuda_context.h"
#include "ops/ops.h"
#include "runtime/backend_hooks.h"

namespace graft::dist {

namespace {

// The op and tensor a failure is about, formatted only when something failed.
std::string context(const char* op, const Tensor* t) {
  if (t == nullptr || !t->defined()) return op;
  return detail::str_cat(op, " of ", describe(*t));
}

void cuda_check(cudaError_t e, const char* call, const char* op, const Tensor* t) {
  if (e == cudaSuccess) [[likely]]
    return;
  cudaGetLastError();  // clear the sticky error so the next op does not report this one
  GRAFT_ERROR("NCCL process group: ", context(op, t), ": ", call, " failed: ", cudaGetErrorString(e));
}

void nccl_check(ncclResult_t r, ncclComm_t comm, const char* call, const char* op, const Tensor* t) {
  if (r == ncclSuccess) [[likely]]
    return;
  // The last-error text says what NCCL saw (a peer gone, a bad pointer); the result code alone
  // is usually just "unhandled system error" or "invalid argument".
  const char* last = ncclGetLastError(comm);
  GRAFT_ERROR("NCCL process group: ", context(op, t), ": ", call, " failed: ", ncclGetErrorString(r),
              (last != nullptr && *last != '\0') ? detail::str_cat(" (", last, ")") : std::string());
}

ncclDataType_t nccl_dtype(DType d) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return ncclUint8;  // graft's bool is one byte holding 0 or 1
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
  }
  GRAFT_ERROR("NCCL process group: no NCCL datatype for dtype ", d);
}

ncclRedOp_t nccl_op(DType d, ReduceOp op) {
  // A sum of 0/1 bytes would not stay 0/1: for flags, sum and max are "any", min is "all".
  if (d == DType::Bool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return ncclSum;  // invariant 4: the division follows on the caller's stream
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// Invariant 3: one NCCL stream per device, created on first use and never destroyed, because
// storages record_stream'ed on it may be freed after any group that used it.
cudaStream_t nccl_stream(int device) {
  static std::mutex mu;
  static std::vector<cudaStream_t>* streams = new std::vector<cudaStream_t>();  // leaked, as the allocators
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<size_t>(device) >= streams->size()) streams->resize(static_cast<size_t>(device) + 1, nullptr);
  cudaStream_t& s = (*streams)[static_cast<size_t>(device)];
  if (s == nullptr) {
    cuda::DeviceGuard guard(device);
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", "create stream",
               nullptr);
  }
  return s;
}

struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using EventPtr = std::unique_ptr<CUevent_st, EventDeleter>;

EventPtr make_event(const char* op, const Tensor* t) {
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", op, t);
  return EventPtr(e);
}

// One collective queued on the NCCL stream. `buffer` is what NCCL wrote; `target` receives it when
// it is a staging copy; `divisor` is Avg's world size (1 otherwise).
class NcclWork final : public Work {
 public:
  NcclWork(const char* op, int device, EventPtr done, Tensor target, Tensor buffer, int divisor)
      : op_(op),
        device_(device),
        done_(std::move(done)),
        target_(std::move(target)),
        buffer_(std::move(buffer)),
        divisor_(divisor) {}

  ~NcclWork() override {
    if (finished_) return;
    // process_group.h invariant 2: an unwaited Work still finishes (stream-ordered, invariant 2
    // above), so an Avg never leaves a bare sum in the tensor. A destructor must not throw.
    try {
      finish();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "graft: NCCL process group: finishing an unwaited %s failed: %s\n", op_, e.what());
    }
  }

  void wait() override {
    if (!finished_) finish();
  }

  bool test() override {
    cuda::DeviceGuard guard(device_);
    cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is an answer, not an error
      return false;
    }
    cuda_check(e, "cudaEventQuery", op_, &target_);
    if (!finished_) finish();
    return true;
  }

 private:
  void finish() {
    cuda::DeviceGuard guard(device_);
    cudaStream_t stream = cuda::current_stream(device_);
    cuda_check(cudaStreamWaitEvent(stream, done_.get(), 0), "cudaStreamWaitEvent", op_, &target_);
    // From here on nothing may run twice (a second division would be wrong), so a failure below
    // is reported, never retried.
    finished_ = true;
    Tensor target = std::move(target_);
    Tensor buffer = std::move(buffer_);
    if (!buffer.defined()) return;
    bool staged = !buffer.is_same(target);
    if (divisor_ == 1 && !staged) return;
    NoGradGuard no_grad;
    // The staging copy is ours: if this stream is not the one it was allocated on, tell the
    // allocator so that its free (when `buffer` goes out of scope) waits for the kernels below.
    if (staged) cuda::record_stream(buffer, stream);
    if (divisor_ != 1) buffer.div_(static_cast<double>(divisor_));
    if (staged) target.copy_(buffer);
  }

  const char* op_;
  int device_;
  EventPtr done_;
  Tensor target_, buffer_;
  int divisor_ = 1;
  bool finished_ = false;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int size, int device, const std::vector<uint8_t>& unique_id);
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  std::string name() const override { return "nccl"; }
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int src) override;
  std::vector<Tensor> all_gather(const Tensor& t) override;
  void barrier() override;

 private:
  void check_tensor(const char* op, const Tensor& t) const;
  // Invariant 1: the NCCL stream waits for everything queued so far on the caller's current stream.
  void order_after_caller(const char* op, const Tensor& t);
  // The completion event of what was just queued on the NCCL stream.
  EventPtr record_done(const char* op, const Tensor& t);
  std::shared_ptr<Work> in_place(const char* op, const char* call, Tensor& t, bool copy_back, int divide_by,
                                 const std::function<ncclResult_t(void*, size_t)>& launch);

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  EventPtr ready_;
  ncclComm_t comm_ = nullptr;
  Tensor barrier_buf_;
};

NcclProcessGroup::NcclProcessGroup(int rank, int size, int device, const std::vector<uint8_t>& unique_id)
    : device_(device) {
  rank_ = rank;
  size_ = size;
  GRAFT_CHECK(size >= 1 && rank >= 0 && rank < size, "NCCL process group: rank ", rank,
              " is not a rank of a world of size ", size);
  int devices = cuda_device_count();
  GRAFT_CHECK(device >= 0 && device < devices, "NCCL process group: no device cuda:", device, " (", devices,
              " CUDA devices found)");
  GRAFT_CHECK(unique_id.size() == NCCL_UNIQUE_ID_BYTES, "NCCL process group: the unique id has ", unique_id.size(),
              " bytes, NCCL's has ", NCCL_UNIQUE_ID_BYTES);
  cuda::DeviceGuard guard(device_);  // ncclCommInitRank binds the communicator to the current device
  stream_ = nccl_stream(device_);
  ready_ = make_event("init", nullptr);
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclResult_t r = ncclCommInitRank(&comm_, size_, id, rank_);
  if (r != ncclSuccess) {
    std::string what = detail::str_cat("init of rank ", rank_, " of ", size_, " on cuda:", device_);
    nccl_check(r, nullptr, "ncclCommInitRank", what.c_str(), nullptr);
  }
}

NcclProcessGroup::~NcclProcessGroup() {
  try {
    cuda::DeviceGuard guard(device_);
    // A communicator with an asynchronous error (a peer gone) would block synchronize and destroy
    // forever: abort it, which also stops its kernels.
    ncclResult_t async_error = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async_error) != ncclSuccess || async_error != ncclSuccess) {
      ncclCommAbort(comm_);
    } else {
      cudaError_t e = cudaStreamSynchronize(stream_);
      if (e == cudaErrorCudartUnloading) return;  // process exit: the driver reclaims everything
      if (e != cudaSuccess) cudaGetLastError();
      ncclCommDestroy(comm_);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graft: NCCL process group: destroying the communicator failed: %s\n", e.what());
  }
  // barrier_buf_ and ready_ go after this body: the buffer back to the caching allocator (its
  // stream, invariant 3, is still alive), the event destroyed.
}

void NcclProcessGroup::check_tensor(const char* op, const Tensor& t) const {
  GRAFT_CHECK(t.defined(), op, ": the tensor is undefined");
  GRAFT_CHECK(t.device().type == DeviceType::CUDA && t.device().index == device_, op,
              ": the NCCL process group takes CUDA tensors on cuda:", device_, ", got ", describe(t),
              t.device().type == DeviceType::CPU ? " (CPU tensors go through the MPI process group)" : "");
}

void NcclProcessGroup::order_after_caller(const char* op, const Tensor& t) {
  cudaStream_t caller = cuda::current_stream(device_);
  if (caller == stream_) return;
  cuda_check(cudaEventRecord(ready_.get(), caller), "cudaEventRecord", op, &t);
  // The wait takes the event's state now, so one event serves every collective.
  cuda_check(cudaStreamWaitEvent(stream_, ready_.get(), 0), "cudaStreamWaitEvent", op, &t);
}

EventPtr NcclProcessGroup::record_done(const char* op, const Tensor& t) {
  EventPtr done = make_event(op, &t);
  cuda_check(cudaEventRecord(done.get(), stream_), "cudaEventRecord", op, &t);
  return done;
}

// The in-place collectives' common path: staging copy, ordering after the caller, the launch on
// the NCCL stream, record_stream and the completion event. `target` names where the Work copies the
// result back (the tensor itself, or the staging buffer when nothing must come back).
std::shared_ptr<Work> NcclProcessGroup::in_place(const char* op, const char* call, Tensor& t, bool copy_back,
                                                 int divide_by, const std::function<ncclResult_t(void*, size_t)>& launch) {
  cuda::DeviceGuard guard(device_);
  // Every rank has the same element count (process_group.h invariant 1), so all skip together;
  // NCCL would refuse the null pointer of an empty storage.
  if (t.numel() == 0) {
    ++num_collectives_;
    return std::make_shared<CompletedWork>();
  }
  Tensor buf = t.is_contiguous() ? t : ops::clone(t);
  order_after_caller(op, t);
  nccl_check(launch(buf.data_ptr(), static_cast<size_t>(buf.numel())), comm_, call, op, &t);
  ++num_collectives_;
  cuda::record_stream(buf, stream_);
  EventPtr done = record_done(op, t);
  return std::make_shared<NcclWork>(op, device_, std::move(done), copy_back ? t : buf, buf, divide_by);
}

std::shared_ptr<Work> NcclProcessGroup::all_reduce(Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t);
  check_reduce(t, op);
  return in_place("all_reduce", "ncclAllReduce", t, true, op == ReduceOp::Avg ? size_ : 1, [&](void* p, size_t n) {
    return ncclAllReduce(p, p, n, nccl_dtype(t.dtype()), nccl_op(t.dtype(), op), comm_, stream_);
  });
}

std::shared_ptr<Work> NcclProcessGroup::broadcast(Tensor& t, int src) {
  check_tensor("broadcast", t);
  GRAFT_CHECK(src >= 0 && src < size_, "broadcast: src ", src, " is not a rank of a world of size ", size_);
  // The root's tensor is unchanged: its staging copy needs no copy back.
  return in_place("broadcast", "ncclBroadcast", t, rank_ != src, 1, [&](void* p, size_t n) {
    return ncclBroadcast(p, p, n, nccl_dtype(t.dtype()), src, comm_, stream_);
  });
}

std::vector<Tensor> NcclProcessGroup::all_gather(const Tensor& t) {
  check_tensor("all_gather", t);
  cuda::DeviceGuard guard(device_);
  Shape shape = t.sizes();
  shape.insert(shape.begin(), size_);
  Tensor all = ops::empty(shape, t.dtype(), t.device());
  if (t.numel() > 0) {
    Tensor src = t.is_contiguous() ? t : ops::clone(t);
    order_after_caller("all_gather", t);
    nccl_check(ncclAllGather(src.data_ptr(), all.data_ptr(), static_cast<size_t>(src.numel()),
                             nccl_dtype(t.dtype()), comm_, stream_),
               comm_, "ncclAllGather", "all_gather", &t);
    cuda::record_stream(src, stream_);
    cuda::record_stream(all, stream_);
    // Sync in the stream sense (invariant 2): the caller's stream is ordered after the gather.
    NcclWork("all_gather", device_, record_done("all_gather", t), all, all, 1).wait();
  }
  ++num_collectives_;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) out.push_back(all.select(0, r));
  return out;
}

void NcclProcessGroup::barrier() {
  cuda::DeviceGuard guard(device_);
  if (!barrier_buf_.defined()) barrier_buf_ = ops::zeros({1}, DType::Float32, Device(DeviceType::CUDA, device_));
  order_after_caller("barrier", barrier_buf_);
  nccl_check(ncclAllReduce(barrier_buf_.data_ptr(), barrier_buf_.data_ptr(), 1, ncclFloat32, ncclSum, comm_, stream_),
             comm_, "ncclAllReduce", "barrier", &barrier_buf_);
  ++num_collectives_;
  cuda::record_stream(barrier_buf_, stream_);
  // The NCCL stream waited for the caller's stream, so this also means every kernel this rank
  // queued before the barrier has finished.
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", "barrier", &barrier_buf_);
}

}  // namespace

std::vector<uint8_t> nccl_unique_id() {
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId", "nccl_unique_id", nullptr);
  const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
  return std::vector<uint8_t>(bytes, bytes + NCCL_UNIQUE_ID_BYTES);
}

std::unique_ptr<ProcessGroup> make_nccl_process_group(int rank, int size, int device_index,
                                                      const std::vector<uint8_t>& unique_id) {
  return std::make_unique<NcclProcessGroup>(rank, size, device_index, unique_id);
}

}  // namespace graft::dist
