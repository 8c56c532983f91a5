#pragma once
// Tensor: a cheap-to-copy handle to a TensorImpl (like libtorch's at::Tensor).
//
// Copying a Tensor shares the impl: `b = a` makes b the same tensor, not a view or a copy.
// The accessors below read the impl directly. The math methods forward to the public functions
// (autograd/functional.h), which record autograd history and then call the dispatcher; they are
// declared here so user code reads `x.matmul(w).relu()`, and defined in the layer that owns them.
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "runtime/error.h"
#include "runtime/hook_handle.h"
#include "runtime/option.h"
#include "runtime/scalar.h"
#include "runtime/tensor_impl.h"
#include "runtime/tensor_options.h"

namespace graft {

namespace autograd {
class Node;
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- metadata ----
  const Shape& sizes() const { return checked()->sizes(); }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return checked()->strides(); }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return checked()->dim(); }
  int64_t numel() const { return checked()->numel(); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  DType dtype() const { return checked()->dtype(); }
  DType scalar_type() const { return dtype(); }
  Device device() const { return checked()->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  bool is_contiguous(MemoryFormat f) const { return checked()->is_contiguous(f); }
  MemoryFormat suggest_memory_format() const { return checked()->suggest_memory_format(); }
  bool is_pinned() const { return checked()->storage()->pinned(); }
  size_t element_size() const { return graft::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  TensorOptions options() const { return TensorOptions{}.dtype(dtype()).device(device()); }

  void* data_ptr() const { return checked()->data(); }
  template <class T> T* data_ptr() const {
    GRAFT_CHECK(dtype_v<T> == dtype(), "data_ptr: expected dtype ", dtype_v<T>, " but the tensor is ", dtype());
    return static_cast<T*>(data_ptr());
  }
  int64_t version() const { return checked()->version(); }
  // Created under InferenceMode: no version counter, never saved for backward.
  bool is_inference() const { return checked()->storage()->is_inference(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // True when both tensors view the same storage.
  bool is_alias_of(const Tensor& o) const {
    return defined() && o.defined() && impl_->storage() == o.impl_->storage();
  }

  // Copies to host and reads. item() needs exactly one element.
  template <class T> T item() const;
  template <class T> std::vector<T> to_vector() const;

  // ---- every op declared with the method variant (codegen/ops/*.yaml): x.exp(), x.add(y, 2),
  // x.sum({1}, true), x.view({2, 3}), x.add_(y), ... Views share storage and version counter; in-place
  // methods bump it once. Defined in autograd/ as forwards to graft::.
#include "runtime/tensor_methods.h"

  // ---- conveniences over the ops (not ops themselves) ----
  Tensor t() const;  // transpose(0, 1) of a 2-D tensor; a 0-d or 1-d tensor itself
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor cpu() const { return to(Device(DeviceType::CPU)); }
  Tensor cuda() const { return to(Device(DeviceType::CUDA)); }

  // ---- autograd (defined in autograd/) ----
  bool requires_grad() const;
  // Leaves only; floating dtypes only.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  Tensor grad() const;
  Tensor& mutable_grad();
  // libtorch's set_data (Python's `p.data = new`): this tensor takes new_data's storage, dtype,
  // shape and strides, and keeps its identity and its autograd state (requires_grad, .grad, hooks).
  // Everyone holding this tensor (an optimizer, a module's members) sees the new data. The version
  // counter is the new storage's; a leaf's gradient accumulator is dropped when the metadata a
  // gradient is checked against (shape, dtype, device) changed. Not on non-leaves or views.
  void set_data(const Tensor& new_data) const;
  void retain_grad();
  bool retains_grad() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Output index of this tensor in grad_fn (0 for leaves).
  uint32_t output_nr() const;
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, const std::vector<Tensor>& inputs = {}) const;
  // fn(grad) -> replacement (or an undefined Tensor to keep grad). Runs each time a gradient for
  // this tensor is computed, and with an undefined grad when the node producing this tensor ran
  // but this output got no gradient (as libtorch's C++ hooks): check grad.defined().
  HookHandle register_hook(std::function<Tensor(const Tensor& grad)> fn) const;
  // Leaves only: fn(leaf) runs after a backward added into leaf.grad(). Owned by the leaf.
  HookHandle register_post_accumulate_grad_hook(std::function<void(Tensor&)> fn) const;

 private:
  TensorImpl* checked() const {
    if (!impl_) [[unlikely]]
      detail::throw_error("Tensor: operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Operators (both sides, Scalar on either side), as libtorch.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

// PyTorch's format: tensor([1., 2., 3.]), with dtype/device suffixes where not default.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// A short description for error messages: "[2, 3] float32 cpu".
std::string describe(const Tensor& t);

}  // namespace graft
