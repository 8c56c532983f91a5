// Tensor's autograd methods, and the printing suffix (requires_grad=True / grad_fn=<...>).
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "ops/print.h"

namespace graft {

using namespace autograd;

bool Tensor::requires_grad() const { return defined() && tensor_requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool r) {
  GRAFT_CHECK(defined(), "requires_grad_: undefined tensor");
  AutogradMeta* m = get_meta(*this);
  if (m && grad_fn_of(*this)) {
    GRAFT_CHECK(r, "requires_grad_: you can only change requires_grad flags of leaf variables. If you want to use "
                   "a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return *this;
  }
  GRAFT_CHECK(!r || is_floating(dtype()), "requires_grad_: only Tensors of floating point dtype can require gradients (got ",
              describe(*this), ")");
  if (!m && !r) return *this;
  GRAFT_CHECK(!r || !is_inference() || is_inference_mode_enabled(), "requires_grad_: Setting requires_grad=True on "
              "inference tensor outside InferenceMode is not allowed (", describe(*this), ")");
  ensure_meta(*this).requires_grad_ = r;
  return *this;
}

bool Tensor::is_leaf() const { return !grad_fn_of(*this); }

void Tensor::set_data(const Tensor& new_data) const {
  GRAFT_CHECK(defined() && new_data.defined(), "set_data: both tensors must be defined");
  AutogradMeta* m = get_meta(*this);
  GRAFT_CHECK(!m || (!m->grad_fn_ && !m->is_view_), "set_data: only a leaf that is not a view can take new data (",
              describe(*this), " has history or is a view)");
  GRAFT_CHECK(!(m && m->requires_grad_) || is_floating(new_data.dtype()), "set_data: a tensor that requires grad "
              "cannot take data of dtype ", new_data.dtype(), " (", describe(*this), ")");
  if (m) {
    // The accumulator checks incoming gradients against the metadata it recorded: a new shape,
    // dtype or device needs a new one (the next graph makes it).
    std::shared_ptr<Node> acc = m->grad_accumulator_.lock();
    if (acc && (sizes() != new_data.sizes() || dtype() != new_data.dtype() || device() != new_data.device()))
      m->grad_accumulator_.reset();
  }
  impl()->shallow_copy_data_from(*new_data.impl());
}

Tensor Tensor::grad() const {
  AutogradMeta* m = get_meta(*this);
  if (!m) return Tensor();
  std::lock_guard<std::mutex> lock(m->mutex_);
  return m->grad_;
}

Tensor& Tensor::mutable_grad() { return ensure_meta(*this).grad_; }

void Tensor::retain_grad() {
  GRAFT_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has requires_grad=False (",
              describe(*this), ")");
  auto fn = grad_fn_of(*this);
  if (!fn) return;  // leaves always keep their grad
  AutogradMeta& m = ensure_meta(*this);
  if (m.retains_grad_) return;
  fn->add_retains_grad_hook(m.output_nr_, impl_ptr());
  m.retains_grad_ = true;
}

bool Tensor::retains_grad() const {
  AutogradMeta* m = get_meta(*this);
  return m && (m->retains_grad_ || (m->requires_grad_ && !m->grad_fn_));
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return grad_fn_of(*this); }

uint32_t Tensor::output_nr() const {
  AutogradMeta* m = get_meta(*this);
  return m ? m->output_nr_ : 0;
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph,
                      const std::vector<Tensor>& inputs) const {
  autograd::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph, inputs);
}

HookHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> fn) const {
  GRAFT_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient (",
              describe(*this), ")");
  AutogradMeta& m = ensure_meta(*this);
  std::shared_ptr<TensorHook> h;
  if (auto node = grad_fn_of(*this)) {
    h = node->add_tensor_pre_hook(m.output_nr_, std::move(fn));
  } else {
    h = std::make_shared<TensorHook>(TensorHook{std::move(fn)});
    m.leaf_hooks_.push_back(h);
  }
  std::weak_ptr<TensorHook> weak = h;
  return HookHandle([weak] {
    if (auto p = weak.lock()) p->fn = nullptr;
  });
}

HookHandle Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> fn) const {
  GRAFT_CHECK(requires_grad(), "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't "
              "require gradient (", describe(*this), ")");
  GRAFT_CHECK(!grad_fn_of(*this), "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
              "registered on non-leaf tensors (", describe(*this), ")");
  GRAFT_CHECK(fn != nullptr, "register_post_accumulate_grad_hook: the hook function is empty");
  AutogradMeta& m = ensure_meta(*this);
  auto h = std::make_shared<std::function<void(Tensor&)>>(std::move(fn));
  {
    std::lock_guard<std::mutex> lock(m.mutex_);
    m.post_accumulate_hooks_.push_back(h);
  }
  std::weak_ptr<std::function<void(Tensor&)>> weak = h;
  return HookHandle([weak] {
    if (auto p = weak.lock()) *p = nullptr;
  });
}

namespace {
std::string autograd_suffix(const Tensor& t) {
  if (auto fn = grad_fn_of(t)) return "grad_fn=<" + fn->name() + ">";
  if (t.requires_grad()) return "requires_grad=True";
  return "";
}
struct RegisterSuffix {
  RegisterSuffix() { set_print_suffix_hook(&autograd_suffix); }
} g_register_suffix;
}  // namespace

}  // namespace graft
