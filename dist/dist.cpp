#include "dist/dist.h"

#include <mpi.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "dist/mpi_process_group.h"
#if GRAFT_HAVE_NCCL
#include "dist/nccl_process_group.h"
#endif

namespace graft::dist {

int64_t mpi_call_count();  // mpi_process_group.cpp

namespace {

struct State {
  std::mutex mu;
  bool initialized = false;
  bool mpi_inited_here = false;
  int rank = 0, size = 1, local_rank = 0;
  std::unique_ptr<ProcessGroup> cpu;                     // MPI, or local at world size 1
  std::map<int, std::unique_ptr<ProcessGroup>> cuda;     // NCCL per device index
};

State& state() {
  static State* s = new State();  // leaked on purpose: atexit's finalize may run after static destructors
  return *s;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return end != v ? static_cast<int>(x) : fallback;
}

void finalize_at_exit() { finalize(); }

}  // namespace

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr;
}

void init() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.initialized) return;
  if (!launched_by_mpi()) {  // invariant 1: a world of one never touches MPI
    s.cpu = std::make_unique<LocalProcessGroup>();
    s.initialized = true;
    return;
  }
  int already = 0;
  mpi_check(MPI_Initialized(&already), "MPI_Initialized");
  if (!already) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    s.mpi_inited_here = true;
    std::atexit(finalize_at_exit);
  }
  auto mpi = std::make_unique<MpiProcessGroup>();
  s.rank = mpi->rank();
  s.size = mpi->size();
  s.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", 0));
  s.cpu = std::move(mpi);
  s.initialized = true;
}

void finalize() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return;
  s.cuda.clear();
  s.cpu.reset();
  if (s.mpi_inited_here) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      count_mpi_call();
      MPI_Finalize();
    }
    s.mpi_inited_here = false;
  }
  s.initialized = false;
  s.rank = 0;
  s.size = 1;
  s.local_rank = 0;
}

bool is_initialized() { return state().initialized; }

int rank() {
  State& s = state();
  return s.initialized ? s.rank : env_int("OMPI_COMM_WORLD_RANK", env_int("PMIX_RANK", 0));
}
int world_size() {
  State& s = state();
  return s.initialized ? s.size : env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1));
}
int local_rank() {
  State& s = state();
  return s.initialized ? s.local_rank : env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
}

int64_t num_mpi_calls() { return mpi_call_count(); }

void abort(int code) {
  State& s = state();
  if (s.initialized && s.size > 1) {
    count_mpi_call();
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

ProcessGroup& process_group(Device device) {
  State& s = state();
  GRAFT_CHECK(s.initialized, "dist: call dist::init() before a collective");
  if (device.type == DeviceType::CPU || s.size == 1) return *s.cpu;
#if GRAFT_HAVE_NCCL
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.cuda.find(device.index);
  if (it == s.cuda.end()) {
    // NCCL's rendezvous: rank 0 makes the unique id, MPI carries it to the others.
    std::vector<uint8_t> id(128);
    if (s.rank == 0) id = nccl_unique_id();
    static_cast<MpiProcessGroup&>(*s.cpu).broadcast_bytes(id.data(), static_cast<int>(id.size()), 0);
    it = s.cuda.emplace(device.index, make_nccl_process_group(s.rank, s.size, device.index, id)).first;
  }
  return *it->second;
#else
  GRAFT_ERROR("dist: a collective on ", device, " needs NCCL, which this build of graft_dist lacks");
#endif
}

std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op, bool async) {
  GRAFT_CHECK(t.defined(), "all_reduce: the tensor is undefined");
  auto w = process_group(t.device()).all_reduce(t, op);
  if (!async) w->wait();
  return w;
}

std::shared_ptr<Work> broadcast(Tensor& t, int src, bool async) {
  GRAFT_CHECK(t.defined(), "broadcast: the tensor is undefined");
  auto w = process_group(t.device()).broadcast(t, src);
  if (!async) w->wait();
  return w;
}

std::vector<Tensor> all_gather(const Tensor& t) {
  GRAFT_CHECK(t.defined(), "all_gather: the tensor is undefined");
  return process_group(t.device()).all_gather(t);
}

void barrier() { process_group(kCPU).barrier(); }

}  // namespace graft::dist
