#pragma once
// OpSchema: what the dispatcher (and every dispatch mode) knows about an op without running it.
//
// Schemas are written in PyTorch's notation and parsed once at registration:
//   "add(Tensor self, Tensor other, Scalar alpha) -> Tensor"
//   "add_(Tensor(a!) self, Tensor other, Scalar alpha) -> Tensor(a!)"   in-place: writes self
//   "transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"        view: output aliases self
//   "max.dim(Tensor self, int dim, bool keepdim) -> (Tensor, Tensor)"   overload name after '.'
// `(a!)` marks an argument the op writes; a return annotated with the same letter aliases it.
#include <string>
#include <vector>

namespace graft {

struct ArgSchema {
  std::string type;  // "Tensor", "Tensor?", "Tensor[]", "Scalar", "int", "int[]", "bool", "float", ...
  std::string name;
  std::string alias;   // alias set letter, empty if none
  bool is_write = false;
  bool is_tensor() const { return type.rfind("Tensor", 0) == 0; }
};

struct OpSchema {
  std::string name;      // "max"
  std::string overload;  // "dim"
  std::vector<ArgSchema> args;
  std::vector<ArgSchema> returns;
  std::vector<int> written_args;            // indices into args
  std::vector<std::pair<int, int>> aliases; // (return index, arg index): the return views that arg
  bool cross_device = false;                // copy-like ops whose tensors may sit on different devices

  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
  bool is_inplace() const { return !written_args.empty(); }
  bool is_view() const { return !aliases.empty() && written_args.empty(); }
  std::string str() const;

  static OpSchema parse(const std::string& text);
};

}  // namespace graft
