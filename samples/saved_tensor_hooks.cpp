// Saved-tensor hooks: decide how the tensors autograd keeps for backward are stored.
//
// Every op that needs a tensor in its backward (a * b needs both a and b) "saves" it. Inside a
// SavedTensorsHooks scope, each saved tensor goes through your pack hook, and what the hook returns
// (anything: a std::any) is kept in the graph instead. When backward needs the tensor, the matching
// unpack hook turns it back into a tensor. This is the printing example from PyTorch's docs.
#include <iostream>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

int main() {
  int packs = 0, unpacks = 0;

  // A pack hook receives the tensor being saved and returns whatever should be stored.
  auto pack_hook = [&](const Tensor& x) -> Packed {
    std::cout << "Packing " << x << "\n";
    ++packs;
    return x;  // keep the tensor itself; a real hook might compress it or move it elsewhere
  };
  // An unpack hook receives what pack returned and must give back a tensor with the original's
  // shape, dtype and device.
  auto unpack_hook = [&](const Packed& p) -> Tensor {
    const Tensor& x = std::any_cast<const Tensor&>(p);
    std::cout << "Unpacking " << x << "\n";
    ++unpacks;
    return x;
  };

  Tensor a = ones({5}, requires_grad());
  Tensor b = ones({5}, requires_grad()) * 2;
  Tensor y;
  {
    // The hooks apply to tensors saved while this object is alive (RAII, per thread).
    SavedTensorsHooks hooks(pack_hook, unpack_hook);
    y = a * b;  // prints "Packing" for a and for b
  }
  // The scope has ended, but the graph remembers which unpack hook goes with each saved tensor.
  y.sum().backward();  // prints "Unpacking" twice

  std::cout << "a.grad = " << a.grad() << "\n";
  bool ok = packs == 2 && unpacks == 2 && a.grad().to_vector<float>() == std::vector<float>(5, 2.f);
  std::cout << (ok ? "ok" : "FAILED") << "\n";
  return ok ? 0 : 1;
}
