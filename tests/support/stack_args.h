#pragma once
// Test helper for dispatch modes: looks through an op call's boxed arguments.
#include <variant>
#include <vector>

#include "graft.h"

namespace graft::test {

// Whether a defined tensor among `args` (alone or in a tensor list) satisfies `pred`.
template <class Pred>
bool any_tensor_arg(const Stack& args, Pred&& pred) {
  for (const auto& a : args) {
    if (auto* t = std::get_if<Tensor>(&a); t && t->defined() && pred(*t)) return true;
    if (auto* l = std::get_if<std::vector<Tensor>>(&a))
      for (const auto& t : *l)
        if (t.defined() && pred(t)) return true;
  }
  return false;
}

}  // namespace graft::test
