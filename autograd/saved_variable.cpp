#include "autograd/saved_variable.h"

#include <mutex>
#include <utility>

#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"
#include "autograd/unpack_prefetch.h"
#include "ops/ops.h"

namespace graft::autograd {

namespace {

thread_local std::vector<SavedHooksPair> t_saved_hooks;
thread_local const SaveSite* t_save_site = nullptr;
std::mutex g_prefetch_mu;  // guards every SavedVariable::prefetch_

std::string tensor_type_str(DType dtype, const Shape& shape, Device device) {
  return detail::str_cat("[", device.is_cuda() ? "CUDA" : "", dtype_type_name(dtype), " ", shape_str(shape), "]");
}

// Whether t is a parameter as far as compression goes: a leaf that requires grad, a view of one,
// or the output of a dtype cast whose input is one (autocast's cast of a weight).
bool parameter_meta(const AutogradMeta* m) {
  if (!m) return false;
  if (m->requires_grad_ && !m->grad_fn_) return true;
  if (m->is_view_ && m->base_.defined()) {
    const AutogradMeta* b = get_meta(m->base_);
    if (b && b->requires_grad_ && !b->grad_fn_) return true;
  }
  if (m->grad_fn_ && m->grad_fn_->name() == "ToCopyBackward") {
    for (const Edge& e : m->grad_fn_->next_edges())
      if (e.is_valid() && e.function->name() == "AccumulateGrad") return true;
  }
  return false;
}

bool softmax_meta(const AutogradMeta* m) {
  if (!m) return false;
  const AutogradMeta* src = m;
  if (m->is_view_ && m->base_.defined()) src = get_meta(m->base_);
  for (const AutogradMeta* a : {m, src}) {
    if (!a || !a->grad_fn_) continue;
    const std::string n = a->grad_fn_->name();
    if (n == "SoftmaxBackward" || n == "LogSoftmaxBackward") return true;
  }
  return false;
}

// Packing runs with grad disabled and must not write its input.
Packed run_pack(const PackHook& pack, const Tensor& t, const SaveSite& site) {
  NoGradGuard ng;
  const SaveSite* outer = t_save_site;
  t_save_site = &site;
  struct Restore {
    const SaveSite* outer;
    ~Restore() { t_save_site = outer; }
  } restore{outer};
  int64_t before = t.version();
  Packed p = pack(t);
  GRAFT_CHECK(t.version() == before, "saved tensors pack hook: a pack hook must not modify its input in place (",
              "the tensor's version went from ", before, " to ", t.version(), ")");
  return p;
}

}  // namespace

const SaveSite* current_save_site() { return t_save_site; }
bool SaveSite::from_parameter() const { return tensor && parameter_meta(get_meta(*tensor)); }
bool SaveSite::from_softmax() const { return tensor && softmax_meta(get_meta(*tensor)); }

const SavedHooksPair* current_saved_hooks() { return t_saved_hooks.empty() ? nullptr : &t_saved_hooks.back(); }
void push_saved_hooks(SavedHooksPair pair) { t_saved_hooks.push_back(std::move(pair)); }
const std::vector<SavedHooksPair>& saved_hooks_stack() { return t_saved_hooks; }
void set_saved_hooks_stack(std::vector<SavedHooksPair> stack) { t_saved_hooks = std::move(stack); }
void pop_saved_hooks() {
  if (!t_saved_hooks.empty()) t_saved_hooks.pop_back();
}

Tensor alias_without_history(const Tensor& t) {
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), t.dtype(), t.sizes(), t.strides(), t.storage_offset()));
}

SavedVariable::SavedVariable(const Tensor& t, bool is_output, const Node* node, SaveTolerance tolerance) {
  if (!t.defined()) return;
  GRAFT_CHECK(!t.is_inference(), "Inference tensors cannot be saved for backward. To work around you can make a clone "
              "to get a normal tensor and use it in autograd. (", node ? node->name() : std::string("an op"),
              " saves ", describe(t), ", created under InferenceMode)");
  was_defined_ = true;
  is_output_ = is_output;
  sign_only_ = tolerance == SaveTolerance::kSignOnly;
  meta_ = TensorMeta::of(t);
  saved_version_ = t.version();
  AutogradMeta* m = get_meta(t);
  requires_grad_ = m && m->requires_grad();
  is_leaf_ = m && m->requires_grad_ && !m->grad_fn_;
  if (m) output_nr_ = m->output_nr_;
  if (is_output && node) {
    weak_grad_fn_ = std::const_pointer_cast<Node>(node->shared_from_this());
  } else if (m && m->grad_fn_) {
    grad_fn_ = m->grad_fn_;
  }
  // An output must not own its node (tensor -> grad_fn -> this node): keep, and hand to a pack hook,
  // a meta-less alias of the same storage and geometry instead.
  Tensor keep = is_output ? alias_without_history(t) : t;
  if (const SavedHooksPair* hooks = current_saved_hooks()) {
    unpack_hook_ = hooks->unpack;
    check_metadata_ = hooks->check_metadata;
    prefetchable_ = hooks->prefetchable;
    hook_kind_ = hooks->kind;
    if (is_leaf_) grad_accumulator_ = grad_accumulator(t);
    packed_ = run_pack(*hooks->pack, keep, SaveSite{node, tolerance, is_output, &t});
    return;
  }
  data_ = std::move(keep);
}

Tensor SavedVariable::unpack(const std::shared_ptr<Node>& node) const {
  if (!was_defined_) return Tensor();
  GRAFT_CHECK(!released_,
              "Trying to backward through the graph a second time (or directly access saved tensors after they "
              "have already been freed). Saved intermediate values of the graph are freed when you call "
              ".backward() or autograd.grad(). Specify retain_graph=true if you need to backward through the graph "
              "a second time or if you need to access saved tensors after calling backward.");
  std::shared_ptr<Node> fn = is_output_ ? (node ? node : weak_grad_fn_.lock()) : grad_fn_;
  if (unpack_hook_) {
    std::shared_future<Tensor> ahead;
    if (prefetchable_) {
      std::lock_guard<std::mutex> lock(g_prefetch_mu);
      ahead = std::exchange(prefetch_, {});
    }
    Tensor r = ahead.valid() ? ahead.get() : (*unpack_hook_)(packed_);
    GRAFT_CHECK(r.defined(), "saved tensors unpack hook: the unpack hook returned an undefined tensor");
    const bool bool_mask = sign_only_ && r.dtype() == kBool && r.sizes() == meta_.shape && r.device() == meta_.device;
    GRAFT_CHECK(!check_metadata_ || meta_.matches(r) || bool_mask,
                "saved tensors unpack hook: the unpack hook must return a tensor with the same shape, dtype and "
                "device as the saved one",
                sign_only_ ? " (or, for this sign-only save, a bool mask of its shape and device)" : "", ": expected ",
                meta_.str(), ", got ", describe(r));
    if (!is_recording_enabled()) return r;
    // The hook's result is data; the history is the one the tensor had when it was saved.
    std::shared_ptr<Node> acc = is_leaf_ ? grad_accumulator_.lock() : nullptr;
    if (!fn && !acc) return r;
    Tensor out = alias_without_history(r);
    auto& m = ensure_meta(out);
    if (fn) {
      m.grad_fn_ = fn;
      m.output_nr_ = output_nr_;
    } else {
      m.requires_grad_ = true;
      m.grad_accumulator_ = acc;
    }
    return out;
  }
  if (data_.version() != saved_version_) {
    std::string which = fn ? detail::str_cat(", which is output ", output_nr_, " of ", fn->name(), ",")
                           : (is_leaf_ ? std::string(", which is a leaf tensor,") : std::string(","));
    GRAFT_ERROR("one of the variables needed for gradient computation has been modified by an inplace operation: ",
                tensor_type_str(meta_.dtype, meta_.shape, meta_.device), which, " is at version ", data_.version(),
                "; expected version ", saved_version_,
                " instead. Hint: the tensor was written in place after it was saved for backward; clone it before "
                "the in-place op, or use AllowMutationOnSavedTensors.");
  }
  if (!is_output_ || !fn || !is_recording_enabled()) return data_;
  // create_graph: the output gets its node back so higher-order gradients flow through it.
  Tensor out = alias_without_history(data_);
  auto& m = ensure_meta(out);
  m.grad_fn_ = fn;
  m.output_nr_ = output_nr_;
  return out;
}

void SavedVariable::start_prefetch(const std::shared_ptr<PrefetchGroup>& group) const {
  if (!unpack_hook_ || !prefetchable_ || released_) return;
  std::lock_guard<std::mutex> lock(g_prefetch_mu);
  if (prefetch_.valid()) return;
  // The job owns copies of the hook and the packed value: it stays valid whatever happens to this
  // SavedVariable (release, the node's death) while it runs.
  prefetch_ = submit_unpack_prefetch([hook = unpack_hook_, packed = packed_] { return (*hook)(packed); }, group);
}

void SavedVariable::release() {
  if (!was_defined_) return;
  if (prefetchable_) {
    std::lock_guard<std::mutex> lock(g_prefetch_mu);
    prefetch_ = {};
  }
  data_ = Tensor();
  packed_.reset();
  grad_fn_.reset();
  grad_accumulator_.reset();
  released_ = true;
}

}  // namespace graft::autograd
