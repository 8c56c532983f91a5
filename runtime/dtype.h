#pragma once
// DType: the element types graft computes with, and PyTorch's promotion rules between them.
#include <cstdint>
#include <ostream>
#include <string>

#include "runtime/half_types.h"

namespace graft {

// New dtypes go at the end: the values index tables (promotion, safetensors names, type bits).
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16, Float16, UInt8, Int32 };
inline constexpr DType kFloat32 = DType::Float32, kFloat64 = DType::Float64, kInt64 = DType::Int64,
                       kBool = DType::Bool, kBFloat16 = DType::BFloat16, kFloat16 = DType::Float16,
                       kHalf = DType::Float16, kUInt8 = DType::UInt8, kInt32 = DType::Int32;
inline constexpr int kNumDTypes = 8;

constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::UInt8: return 1;
    case DType::Int32: return 4;
  }
  return 0;
}
constexpr bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}
// bfloat16 and float16: stored in 16 bits, computed in float (one rounding per op's result).
constexpr bool is_reduced_floating(DType t) { return t == DType::BFloat16 || t == DType::Float16; }
constexpr bool is_integral(DType t, bool include_bool = true) {
  return t == DType::Int64 || t == DType::Int32 || t == DType::UInt8 || (include_bool && t == DType::Bool);
}

// "float32", "bfloat16", "uint8", ...: the names used in printing and error messages (PyTorch's).
const char* dtype_name(DType t);
// PyTorch's legacy type names used in autograd messages: "Float", "Double", "Long", "Bool",
// "BFloat16", "Half", "Byte", "Int".
const char* dtype_type_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);

// Promotion of two tensor dtypes (both participating with equal priority): PyTorch's
// promote_types table. Within a category the wider type wins; bfloat16 with float16 gives
// float32 (neither holds the other); uint8 with a signed integer gives the signed one when it is
// wider (graft has no int8/int16, so uint8 with int32 is int32, with int64 int64).
DType promote_types(DType a, DType b);
// The dtype arithmetic on a tensor of dtype `t` produces: bool counts as int64 in arithmetic.
inline DType arithmetic_dtype(DType t) { return t == DType::Bool ? DType::Int64 : t; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace graft
