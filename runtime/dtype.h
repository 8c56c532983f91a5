#pragma once
// DType: the element types graft computes with, and PyTorch's promotion rules between them.
#include <cstdint>
#include <ostream>
#include <string>

namespace graft {

enum class DType : uint8_t { Float32, Float64, Int64, Bool };
inline constexpr DType kFloat32 = DType::Float32, kFloat64 = DType::Float64, kInt64 = DType::Int64,
                       kBool = DType::Bool;
inline constexpr int kNumDTypes = 4;

constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }
constexpr bool is_integral(DType t, bool include_bool = true) {
  return t == DType::Int64 || (include_bool && t == DType::Bool);
}

// "float32", "float64", "int64", "bool": the names used in printing and error messages.
const char* dtype_name(DType t);
// PyTorch's legacy type names used in autograd messages: "Float", "Double", "Long", "Bool".
const char* dtype_type_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);

// Promotion of two tensor dtypes (both participating with equal priority):
// bool < int64 < float32 < float64.
DType promote_types(DType a, DType b);
// The dtype arithmetic on a tensor of dtype `t` produces: bool counts as int64 in arithmetic.
inline DType arithmetic_dtype(DType t) { return t == DType::Bool ? DType::Int64 : t; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace graft
