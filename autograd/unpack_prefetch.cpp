#include "autograd/unpack_prefetch.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "autograd/grad_mode.h"
#include "runtime/error.h"

namespace graft::autograd {

namespace {

std::atomic<int> g_lookahead{0};

// A hook call and where its result goes. The call's captures (a file's entry, a host copy) are
// destroyed before the job counts as finished, so once a task's group is done, no prefetch of it
// still holds a file or a copy (invariant 4).
struct Job {
  std::function<Tensor()> fn;
  std::promise<Tensor> done;
  std::shared_ptr<PrefetchGroup> group;
  void run() {
    Tensor r;
    std::exception_ptr error;
    try {
      r = fn();
    } catch (...) {
      error = std::current_exception();
    }
    fn = nullptr;
    if (error) done.set_exception(error);
    else done.set_value(std::move(r));
    group->finish();
  }
};

// One thread, FIFO: jobs are submitted in the order the engine will need them, so the first
// submitted is the first one a rule waits for.
class PrefetchThread {
 public:
  PrefetchThread() : thread_([this] { loop(); }) {}
  ~PrefetchThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void push(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    // The hooks' results are data: no history is recorded while they run (invariant 5).
    NoGradGuard no_grad;
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job.run();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

PrefetchThread& prefetch_thread() {
  static PrefetchThread t;
  return t;
}

}  // namespace

void set_unpack_prefetch(int lookahead) {
  GRAFT_CHECK(lookahead >= 0, "set_unpack_prefetch: the lookahead must be >= 0 (0 turns prefetch off), got ",
              lookahead);
  g_lookahead.store(lookahead, std::memory_order_relaxed);
}

int unpack_prefetch() { return g_lookahead.load(std::memory_order_relaxed); }

void PrefetchGroup::add() {
  std::lock_guard<std::mutex> lock(mu_);
  ++pending_;
}

void PrefetchGroup::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--pending_ == 0) cv_.notify_all();
}

void PrefetchGroup::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return pending_ == 0; });
}

std::shared_future<Tensor> submit_unpack_prefetch(std::function<Tensor()> job, std::shared_ptr<PrefetchGroup> group) {
  group->add();
  Job j{std::move(job), {}, std::move(group)};
  std::shared_future<Tensor> f = j.done.get_future().share();
  prefetch_thread().push(std::move(j));
  return f;
}

}  // namespace graft::autograd
