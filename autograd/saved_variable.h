#pragma once
// SavedVariable: a tensor an op keeps for its backward.
//
// It holds either the tensor itself or, when saved-tensor hooks were active at save time, the
// value the pack hook returned plus the unpack hook captured then (the innermost pair wins; the
// hooks alive at unpack time do not matter).
//
// Invariants:
// - A tensor saved by the node that produced it (an "output") is stored as a plain alias without
//   autograd meta and a *weak* reference to the node: storing the tensor itself would make the node
//   own itself through tensor -> grad_fn. unpack() re-attaches the node when grad mode is on, so
//   create_graph sees the full history.
// - saved_version_ is the storage's version at save time. Without hooks, unpack() compares it with
//   the current version so an in-place write after saving is an error, never a silent wrong
//   gradient. With hooks, what the hook returns is the hooks' business (as in PyTorch).
// - After release (the node ran and the graph was not kept) the data is gone and unpack() throws
//   the "backward through the graph a second time" error.
// - A prefetch (unpack_prefetch.h) is claimed by exactly one unpack(), which then does not call the
//   hook: each unpack() still corresponds to one hook call, on this thread or the prefetch thread.
// - What an unpack hook returns is data only: under grad mode (create_graph) unpack() gives it the
//   history the tensor had at save time (its grad_fn, its node for outputs, or its leaf's
//   accumulator), as PyTorch does. That is what makes higher-order gradients through
//   checkpoint's recomputed tensors flow into the original graph: the recomputation's own graph
//   is thrown away, never referenced from the original one.
#include <any>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "runtime/tensor.h"
#include "runtime/tensor_meta.h"

namespace graft::autograd {

class PrefetchGroup;

// What a saved slot's rule needs of the tensor, declared per op (`compress:` in codegen/ops/*.yaml)
// or by the hand-written node that saves it. Hooks that do not compress ignore it.
// - kExact: the values themselves. The default: custom Functions, statistics, indices, softmax
//   outputs and anything not declared otherwise.
// - kLossy: the rule's result stays a good approximation when the values are approximated (a codec
//   may keep fewer bits).
// - kSignOnly: the rule reads only whether each element is <= 0 (relu's threshold), so a 1-bit mask
//   unpacked as 1/0 gives the very same gradient.
enum class SaveTolerance : uint8_t { kExact, kLossy, kSignOnly };

// The tensor a pack hook is being called for: where it comes from and what its reader tolerates.
// current_save_site() is non-null only during a pack hook's call made by SavedVariable.
struct SaveSite {
  const Node* node = nullptr;  // the node saving it (null when saved outside a node)
  SaveTolerance tolerance = SaveTolerance::kExact;
  bool is_output = false;
  const Tensor* tensor = nullptr;  // as the op passed it, with its autograd meta
  // Asked only by hooks that need them (CompressSaved), so other hooks (checkpoint, SaveOnCpu) pay
  // nothing for them:
  // - a leaf that requires grad (a parameter), a view of one, or a dtype cast of one (autocast's
  //   cast of a weight): never compressed, whatever the slot tolerates;
  bool from_parameter() const;
  // - an output of softmax or log_softmax (or a view of one), saved by another op (attention's
  //   probabilities saved by bmm): never compressed. Its small entries carry the gradient.
  bool from_softmax() const;
};
const SaveSite* current_save_site();

using Packed = std::any;
using PackHook = std::function<Packed(const Tensor&)>;
using UnpackHook = std::function<Tensor(const Packed&)>;

// The saved-tensor hook pair in force for the current thread, or null (see saved_tensor_hooks.h).
struct SavedHooksPair {
  std::shared_ptr<const PackHook> pack;
  std::shared_ptr<const UnpackHook> unpack;
  // Whether unpack() checks the hook's result against the saved shape, dtype and device. Off only
  // for graph features that run their own check (checkpoint with determinism_check=false uses the
  // recomputed tensor as computed, as PyTorch does).
  bool check_metadata = true;
  // What keeps the tensor, for graph export: "hooks", "save_on_cpu", "checkpoint", ...
  std::string kind = "hooks";
  // Whether the engine may run the unpack hook ahead of time on its prefetch thread (see
  // unpack_prefetch.h): true only for hooks whose unpack is a pure function of the packed value.
  bool prefetchable = false;
};
const SavedHooksPair* current_saved_hooks();
// The thread-local stack behind current_saved_hooks(); SavedTensorsHooks pushes and pops it.
void push_saved_hooks(SavedHooksPair pair);
void pop_saved_hooks();
const std::vector<SavedHooksPair>& saved_hooks_stack();
void set_saved_hooks_stack(std::vector<SavedHooksPair> stack);

// Same storage and geometry as `t`, without autograd meta, made without dispatching (so no dispatch
// mode sees it): what a saved output stores, and what checkpoint keeps of recomputed tensors.
Tensor alias_without_history(const Tensor& t);

class SavedVariable {
 public:
  SavedVariable() = default;
  // `node` is the node saving it (used to detect outputs and to name it in errors).
  // `tolerance`: what the saving rule needs of the values (SaveTolerance); pack hooks read it
  // through current_save_site().
  SavedVariable(const Tensor& t, bool is_output, const Node* node = nullptr,
                SaveTolerance tolerance = SaveTolerance::kExact);

  // The saved tensor. `node` must be the node that saved it when it was an output.
  Tensor unpack(const std::shared_ptr<Node>& node = nullptr) const;
  void release();
  // Starts the unpack hook on the prefetch thread when the hook is prefetchable and no prefetch is
  // in flight; the next unpack() takes the result instead of calling the hook. `group` counts the
  // job for the graph task that waits for it.
  void start_prefetch(const std::shared_ptr<PrefetchGroup>& group) const;
  bool was_defined() const { return was_defined_; }
  bool has_hooks() const { return unpack_hook_ != nullptr; }
  // Introspection (graph export): metadata at save time, whether released, who keeps it.
  const TensorMeta& meta() const { return meta_; }
  const Shape& shape() const { return meta_.shape; }
  DType dtype() const { return meta_.dtype; }
  Device device() const { return meta_.device; }
  bool released() const { return released_; }
  bool is_output() const { return is_output_; }
  const std::string& hook_kind() const { return hook_kind_; }

 private:
  Tensor data_;
  Packed packed_;
  std::shared_ptr<const UnpackHook> unpack_hook_;
  std::weak_ptr<Node> grad_accumulator_;  // leaves saved through hooks: where their history goes
  std::weak_ptr<Node> weak_grad_fn_;  // outputs: the node itself
  std::shared_ptr<Node> grad_fn_;     // non-outputs with history: their grad_fn at save time
  TensorMeta meta_;  // of the tensor at save time
  int64_t saved_version_ = 0;
  uint32_t output_nr_ = 0;
  bool was_defined_ = false;
  bool is_output_ = false;
  bool is_leaf_ = false;
  bool requires_grad_ = false;
  bool released_ = false;
  bool check_metadata_ = true;
  // Saved for SaveTolerance::kSignOnly: an unpack hook may hand back a bool mask of the same shape
  // and device in place of the saved dtype (CompressSaved decodes its 1-bit masks so, a quarter of
  // a float mask's bytes). The rules reading such slots (relu's, dropout's) accept one.
  bool sign_only_ = false;
  bool prefetchable_ = false;
  std::string hook_kind_;  // empty without hooks
  // A started prefetch, claimed by the next unpack(); guarded by one process-wide mutex, taken only
  // on the prefetchable hooks' path.
  mutable std::shared_future<Tensor> prefetch_;
};

}  // namespace graft::autograd
