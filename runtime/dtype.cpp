#include "runtime/dtype.h"

namespace graft {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
  }
  return "?";
}

const char* dtype_type_name(DType t) {
  switch (t) {
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Int64: return "Long";
    case DType::Bool: return "Bool";
    case DType::BFloat16: return "BFloat16";
    case DType::Float16: return "Half";
    case DType::UInt8: return "Byte";
    case DType::Int32: return "Int";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // Categories: bool < integral < floating. A higher category wins outright.
  auto category = [](DType t) { return t == DType::Bool ? 0 : is_floating(t) ? 2 : 1; };
  const int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (is_reduced_floating(a) && is_reduced_floating(b)) return DType::Float32;  // bf16 + f16
    auto width = [](DType t) { return t == DType::Float64 ? 3 : t == DType::Float32 ? 2 : 1; };
    return width(a) >= width(b) ? a : b;
  }
  // Integers: the wider one (uint8 < int32 < int64; every signed one graft has holds uint8).
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace graft
