#pragma once
// AllowMutationOnSavedTensors: inside this scope, writing in place to a tensor that autograd saved
// (or to any alias of its storage) is allowed: the original is cloned just before the write, and
// backward sees the value as it was when it was saved.
//
// Built from the two engine mechanisms, not beside them:
// - a saved-tensor hook pair: pack records each saved tensor's id and storage and returns a token;
//   unpack returns the clone if one was made, else the original. The token dies with the
//   SavedVariable, so a tensor freed by backward before it is written is never cloned.
// - a dispatch mode: before any op whose schema writes an argument (in-place and out= ops), it
//   clones every saved tensor that shares that argument's storage.
// Nesting throws; a backward after the scope ended throws a message naming
// allow_mutation_on_saved_tensors; all state is dropped at scope exit.
#include <memory>

namespace graft::autograd {

class SavedTensorsHooks;
struct AllowMutationState;
class AllowMutationMode;

class AllowMutationOnSavedTensors {
 public:
  AllowMutationOnSavedTensors();
  ~AllowMutationOnSavedTensors();
  AllowMutationOnSavedTensors(const AllowMutationOnSavedTensors&) = delete;
  AllowMutationOnSavedTensors& operator=(const AllowMutationOnSavedTensors&) = delete;

 private:
  std::shared_ptr<AllowMutationState> state_;
  std::unique_ptr<AllowMutationMode> mode_;
  std::unique_ptr<class DispatchModeGuardHolder> mode_guard_;
  std::unique_ptr<SavedTensorsHooks> hooks_;
};

}  // namespace graft::autograd
