#include "ops/reduced_precision_fallback.h"

#include <optional>

#include "ops/kernel_utils.h"

namespace graft::kernels {
namespace {

// The one 16-bit float dtype among the tensor arguments, if exactly one occurs.
std::optional<DType> reduced_dtype_of(const Stack& args) {
  std::optional<DType> found;
  bool conflict = false;
  auto see = [&](const Tensor& t) {
    if (!t.defined() || !is_reduced_floating(t.dtype())) return;
    if (found && *found != t.dtype()) conflict = true;
    found = t.dtype();
  };
  for (const IValue& v : args) {
    if (const Tensor* t = std::get_if<Tensor>(&v)) see(*t);
    else if (const auto* ts = std::get_if<std::vector<Tensor>>(&v))
      for (const Tensor& t : *ts) see(t);
  }
  if (conflict) return std::nullopt;
  return found;
}

Tensor as_float(const Tensor& t) {
  if (!t.defined() || !is_reduced_floating(t.dtype())) return t;
  Tensor out = new_tensor_in_format(t, MemoryFormat::Preserve, kFloat32, t.device());
  device_copy(out, t);
  return out;
}

Tensor round_to(const Tensor& t, DType low) {
  if (!t.defined() || t.dtype() != kFloat32) return t;
  Tensor out = new_tensor_in_format(t, MemoryFormat::Preserve, low, t.device());
  device_copy(out, t);
  return out;
}

// Whether the call mixes the 16-bit tensors with float32/float64 ones, or names its result dtype:
// then the float results are what the op promotes to or was asked for, and are not rounded.
bool results_stay_float(const Stack& args) {
  auto wide = [](const Tensor& t) { return t.defined() && (t.dtype() == kFloat32 || t.dtype() == kFloat64); };
  for (const IValue& v : args) {
    if (std::holds_alternative<DType>(v)) return true;
    if (const Tensor* t = std::get_if<Tensor>(&v); t && wide(*t)) return true;
    if (const auto* ts = std::get_if<std::vector<Tensor>>(&v))
      for (const Tensor& t : *ts)
        if (wide(t)) return true;
  }
  return false;
}

}  // namespace

OpResult reduced_precision_fallback(const Op& op, Stack& args, BoxedKernel kernel) {
  const std::optional<DType> low = reduced_dtype_of(args);
  if (!low) return kernel(args);
  const bool keep_float = results_stay_float(args);
  // Written arguments: (original, float copy) pairs to write back.
  std::vector<std::pair<Tensor, Tensor>> written;
  Stack up = args;
  for (size_t i = 0; i < up.size(); ++i) {
    if (Tensor* t = std::get_if<Tensor>(&up[i])) {
      Tensor f = as_float(*t);
      const bool is_written = std::find(op.schema.written_args.begin(), op.schema.written_args.end(),
                                        static_cast<int>(i)) != op.schema.written_args.end();
      if (is_written && !f.is_same(*t)) written.emplace_back(*t, f);
      *t = f;
    } else if (auto* ts = std::get_if<std::vector<Tensor>>(&up[i])) {
      for (Tensor& t : *ts) t = as_float(t);
    }
  }
  OpResult out = kernel(up);
  for (auto& [orig, f] : written) device_copy(orig, f);
  for (Tensor& r : out) {
    bool replaced = false;
    for (auto& [orig, f] : written)
      if (r.defined() && r.is_same(f)) {
        r = orig;
        replaced = true;
      }
    if (!replaced && !keep_float) r = round_to(r, *low);
  }
  return out;
}

}  // namespace graft::kernels
