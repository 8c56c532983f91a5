#include "autograd/allow_mutation.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/saved_tensor_hooks.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft::autograd {

struct AllowMutationState {
  std::mutex mu;
  bool closed = false;
  int64_t next_id = 0;
  std::unordered_map<int64_t, Tensor> original;
  std::unordered_map<int64_t, Tensor> cloned;
  std::unordered_map<const Storage*, std::vector<int64_t>> by_storage;

  void forget(int64_t id) {
    // Dropped after the lock is released: the original may hold the last reference to its grad_fn,
    // whose saved variables hold tokens that call forget() again.
    Tensor dead_original, dead_clone;
    std::lock_guard<std::mutex> lock(mu);
    auto it = original.find(id);
    if (it == original.end()) return;
    auto& ids = by_storage[it->second.impl()->storage().get()];
    std::erase(ids, id);
    if (ids.empty()) by_storage.erase(it->second.impl()->storage().get());
    dead_original = std::move(it->second);
    original.erase(it);
    if (auto c = cloned.find(id); c != cloned.end()) {
      dead_clone = std::move(c->second);
      cloned.erase(c);
    }
  }
};

namespace {

thread_local AllowMutationState* t_active = nullptr;

// Lives inside the SavedVariable's packed value; when the graph frees the saved tensor, the
// token's destructor drops it from the state so it is never cloned.
struct Token {
  Token(int64_t i, std::weak_ptr<AllowMutationState> s) : id(i), state(std::move(s)) {}
  Token(const Token&) = delete;  // one token per save: a copy's destructor would forget the id
  Token& operator=(const Token&) = delete;
  ~Token() {
    if (auto s = state.lock()) s->forget(id);
  }
  int64_t id;
  std::weak_ptr<AllowMutationState> state;
};

}  // namespace

// Clones every saved tensor that aliases an argument the op is about to write.
class AllowMutationMode final : public DispatchMode {
 public:
  explicit AllowMutationMode(std::shared_ptr<AllowMutationState> s) : state_(std::move(s)) {}
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    for (int i : op.schema.written_args) {
      const auto* t = std::get_if<Tensor>(&args[static_cast<size_t>(i)]);
      if (!t || !t->defined()) continue;
      std::vector<std::pair<int64_t, Tensor>> to_clone;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        auto it = state_->by_storage.find(t->impl()->storage().get());
        if (it == state_->by_storage.end()) continue;
        for (int64_t id : it->second)
          if (!state_->cloned.count(id)) to_clone.emplace_back(id, state_->original[id]);
      }
      for (auto& [id, orig] : to_clone) {
        Tensor c;
        {
          NoGradGuard ng;
          c = ops::clone(orig);  // issued from inside the mode: runs below it, never re-enters
        }
        std::lock_guard<std::mutex> lock(state_->mu);
        state_->cloned[id] = c;
      }
    }
    return next(args);
  }

 private:
  std::shared_ptr<AllowMutationState> state_;
};

class DispatchModeGuardHolder {
 public:
  explicit DispatchModeGuardHolder(DispatchMode* m) : guard(m) {}
  DispatchModeGuard guard;
};

AllowMutationOnSavedTensors::AllowMutationOnSavedTensors() {
  GRAFT_CHECK(t_active == nullptr, "allow_mutation_on_saved_tensors contexts cannot be nested");
  state_ = std::make_shared<AllowMutationState>();
  std::weak_ptr<AllowMutationState> weak = state_;
  hooks_ = std::make_unique<SavedTensorsHooks>(
      [weak](const Tensor& t) -> Packed {
        auto s = weak.lock();
        GRAFT_CHECK(s != nullptr, "allow_mutation_on_saved_tensors: the context has ended");
        std::lock_guard<std::mutex> lock(s->mu);
        int64_t id = s->next_id++;
        s->original[id] = t;
        s->by_storage[t.impl()->storage().get()].push_back(id);
        return std::make_shared<Token>(id, weak);
      },
      [weak](const Packed& p) -> Tensor {
        const auto& tok = std::any_cast<const std::shared_ptr<Token>&>(p);
        auto s = weak.lock();
        GRAFT_CHECK(s != nullptr && !s->closed,
                    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context in which the graph "
                    "was originally recorded.");
        std::lock_guard<std::mutex> lock(s->mu);
        if (auto it = s->cloned.find(tok->id); it != s->cloned.end()) return it->second;
        return s->original.at(tok->id);
      });
  mode_ = std::make_unique<AllowMutationMode>(state_);
  mode_guard_ = std::make_unique<DispatchModeGuardHolder>(mode_.get());
  t_active = state_.get();
}

AllowMutationOnSavedTensors::~AllowMutationOnSavedTensors() {
  mode_guard_.reset();
  hooks_.reset();
  // Destroyed after the lock is released (see forget()).
  std::unordered_map<int64_t, Tensor> original, cloned;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closed = true;
    original.swap(state_->original);
    cloned.swap(state_->cloned);
    state_->by_storage.clear();
  }
  t_active = nullptr;
}

}  // namespace graft::autograd
