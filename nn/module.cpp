#include "nn/module.h"

#include <functional>
#include <sstream>

#include "autograd/autograd_meta.h"
#include "autograd/functional.h"
#include "autograd/zero_grad.h"
#include "autograd/grad_mode.h"
#include "runtime/shape.h"

namespace graft::nn {

Tensor Module::forward(const Tensor&) {
  GRAFT_ERROR(name(), ": forward(const Tensor&) is not implemented for this module");
}

void Module::check_new_name(const std::string& name) const {
  GRAFT_CHECK(!name.empty(), this->name(), ": a parameter, buffer or module name must not be empty");
  GRAFT_CHECK(name.find('.') == std::string::npos, this->name(), ": name '", name, "' must not contain '.'");
  for (const auto& s : params_)
    GRAFT_CHECK(s->name != name, this->name(), ": a parameter named '", name, "' is already registered");
  for (const auto& s : buffers_)
    GRAFT_CHECK(s->name != name, this->name(), ": a buffer named '", name, "' is already registered");
  for (const auto& c : children_)
    GRAFT_CHECK(c.first != name, this->name(), ": a submodule named '", name, "' is already registered");
}

namespace {

// Whether `t` can take new data in place (Tensor::set_data): a leaf that is no autograd view.
bool can_set_data(const Tensor& t) {
  const autograd::AutogradMeta* m = autograd::get_meta(t);
  return m == nullptr || (m->grad_fn_ == nullptr && !m->is_view_);
}

// Invariant 2: what a module stores can take to()'s data in place.
Tensor storable(Tensor t) { return !t.defined() || can_set_data(t) ? t : t.detach(); }

}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  // A parameter is a leaf of its own, never part of the graph it was computed in.
  tensor = storable(std::move(tensor));
  if (tensor.defined()) tensor.requires_grad_(requires_grad);
  params_.push_back(std::make_unique<Slot>(Slot{name, std::move(tensor)}));
  return params_.back()->value;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  buffers_.push_back(std::make_unique<Slot>(Slot{name, storable(std::move(tensor))}));
  return buffers_.back()->value;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> module) {
  GRAFT_CHECK(module, this->name(), ": register_module('", name, "') got a null module");
  check_new_name(name);
  children_.emplace_back(name, std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  GRAFT_CHECK(module, this->name(), ": replace_module('", name, "') got a null module");
  for (auto& c : children_)
    if (c.first == name) {
      c.second = std::move(module);
      return;
    }
  GRAFT_ERROR(this->name(), ": replace_module: no submodule named '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool recurse, OrderedDict<Tensor>& out) const {
  for (const auto& s : params ? params_ : buffers_)
    if (s->value.defined()) out.insert(prefix + s->name, s->value);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, true, out);
}

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<Tensor> out;
  collect("", true, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<Tensor> out;
  collect("", false, recurse, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.insert(n, c);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules() const {
  OrderedDict<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) {
    out.insert(n, c);
    for (const auto& [cn, cc] : c->named_modules()) out.insert(n + "." + cn, cc);
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

template <class F>
void Module::convert_in_place(F&& convert) {
  NoGradGuard ng;
  // Invariant 3. The converted data of t, or nothing when t has it already (a tensor met a second
  // time through a module or tensor shared twice, or one that needs no change).
  auto converted = [&](const Tensor& t) -> Tensor {
    Tensor moved = convert(t.detach());
    return moved.is_alias_of(t) && moved.dtype() == t.dtype() ? Tensor() : moved;
  };
  for (auto& s : params_) {
    if (!s->value.defined()) continue;
    if (Tensor d = converted(s->value); d.defined()) s->value.set_data(d);
    Tensor g = s->value.grad();
    if (!g.defined()) continue;
    if (Tensor d = converted(g); d.defined()) {
      // A gradient with history (backward with create_graph) cannot take new data: it is replaced
      // by its converted value, without the history.
      if (can_set_data(g)) g.set_data(d);
      else s->value.mutable_grad() = d;
    }
  }
  for (auto& s : buffers_) {
    if (!s->value.defined()) continue;
    if (Tensor d = converted(s->value); d.defined()) s->value.set_data(d);
  }
}

void Module::to(Device device, bool non_blocking) {
  convert_in_place([&](const Tensor& t) { return t.to(device, non_blocking); });
  for (auto& c : children_) c.second->to(device, non_blocking);
}

void Module::to(DType dtype) {
  // Integer parameters would lose their gradients and every fractional value: PyTorch refuses too.
  GRAFT_CHECK(is_floating(dtype), name(), ".to: only accepts floating point dtypes, but got desired dtype=", dtype);
  convert_in_place([&](const Tensor& t) {
    return is_floating(t.dtype()) ? t.to(dtype) : t;
  });
  for (auto& c : children_) c.second->to(dtype);
}

void Module::to(MemoryFormat f) {
  convert_in_place([&](const Tensor& t) {
    bool convert = t.dim() == 4 && is_floating(t.dtype()) && f != MemoryFormat::Preserve && t.suggest_memory_format() != f;
    return convert ? t.clone(f) : t;
  });
  for (auto& c : children_) c.second->to(f);
}

void Module::zero_grad(bool set_to_none) { autograd::zero_grads(parameters(), set_to_none); }

StateDict Module::state_dict() const {
  StateDict out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (const auto& s : m.params_)
      if (s->value.defined()) out.insert(prefix + s->name, s->value);
    for (const auto& s : m.buffers_)
      if (s->value.defined()) out.insert(prefix + s->name, s->value);
    for (const auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, "");
  return out;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}
}  // namespace

void Module::load_state_dict(const StateDict& dict, bool strict) {
  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [k, v] : own)
    if (!dict.contains(k)) missing.push_back(k);
  for (const auto& [k, v] : dict) {
    const Tensor* mine = own.find(k);
    if (!mine) {
      unexpected.push_back(k);
      continue;
    }
    GRAFT_CHECK(v.defined(), "load_state_dict: the checkpoint's tensor for ", k, " is undefined");
    if (v.sizes() != mine->sizes())
      mismatched.push_back("size mismatch for " + k + ": " + shape_str(v.sizes()) + " in the checkpoint, " +
                           shape_str(mine->sizes()) + " in the model");
  }
  std::vector<std::string> parts;
  if (strict && !missing.empty()) parts.push_back("missing keys: " + join(missing));
  if (strict && !unexpected.empty()) parts.push_back("unexpected keys: " + join(unexpected));
  for (const auto& m : mismatched) parts.push_back(m);
  if (!parts.empty()) {
    std::string msg = "load_state_dict: ";
    for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
    GRAFT_ERROR(msg);
  }
  NoGradGuard ng;
  for (auto& [k, mine] : own) {
    const Tensor* v = dict.find(k);
    if (!v) continue;
    Tensor dst = mine;
    dst.copy_(*v);
  }
}

}  // namespace graft::nn
