#pragma once
// IValue: one boxed op argument. The dispatcher passes an op's arguments as a Stack of IValues, so
// a dispatch mode can see and rewrite any op call without knowing its C++ signature.
#include <optional>
#include <type_traits>
#include <string>
#include <variant>
#include <vector>

#include "runtime/tensor.h"

namespace graft {

using IValue = std::variant<std::monostate, Tensor, Scalar, int64_t, bool, double, Shape, std::vector<Tensor>,
                            DType, Device, std::string>;
using Stack = std::vector<IValue>;

namespace detail {
template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
}  // namespace detail

// Boxing: C++ argument -> IValue.
inline IValue box(const Tensor& t) { return t; }
inline IValue box(Scalar s) { return s; }
inline IValue box(int64_t v) { return v; }
inline IValue box(int v) { return static_cast<int64_t>(v); }
inline IValue box(bool v) { return v; }
inline IValue box(double v) { return v; }
inline IValue box(const Shape& v) { return v; }
inline IValue box(const std::vector<Tensor>& v) { return v; }
inline IValue box(DType v) { return v; }
inline IValue box(Device v) { return v; }
inline IValue box(const std::string& v) { return v; }
inline IValue box(const char* v) { return std::string(v); }
// Enums (option arguments, MemoryFormat) travel as their value; the schema names the type.
template <class E>
  requires std::is_enum_v<E>
IValue box(E v) {
  return static_cast<int64_t>(v);
}
template <class T> IValue box(const std::optional<T>& v) { return v ? box(*v) : IValue{}; }

// Unboxing: IValue -> the kernel's parameter type. Tensors, lists and strings are returned by
// reference into the Stack (no copy); a None tensor argument unboxes to a shared undefined Tensor.
template <class T> struct Unbox {
  static decltype(auto) get(IValue& v) {
    using U = std::decay_t<T>;
    if constexpr (detail::is_optional<U>::value) {
      if (std::holds_alternative<std::monostate>(v)) return U(std::nullopt);
      return U(Unbox<typename U::value_type>::get(v));
    } else if constexpr (std::is_same_v<U, Tensor>) {
      static const Tensor kUndefined;
      if (std::holds_alternative<std::monostate>(v)) return static_cast<const Tensor&>(kUndefined);
      return static_cast<const Tensor&>(std::get<Tensor>(v));
    } else if constexpr (std::is_same_v<U, double>) {
      if (auto* s = std::get_if<Scalar>(&v)) return s->to_double();
      if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
      return double(std::get<double>(v));
    } else if constexpr (std::is_same_v<U, Scalar>) {
      if (auto* d = std::get_if<double>(&v)) return Scalar(*d);
      if (auto* i = std::get_if<int64_t>(&v)) return Scalar(*i);
      return Scalar(std::get<Scalar>(v));
    } else if constexpr (std::is_enum_v<U> && !std::is_same_v<U, DType>) {
      return static_cast<U>(std::get<int64_t>(v));
    } else if constexpr (std::is_same_v<U, int64_t> || std::is_same_v<U, bool> || std::is_same_v<U, DType> ||
                         std::is_same_v<U, Device>) {
      return U(std::get<U>(v));
    } else {
      return static_cast<const U&>(std::get<U>(v));
    }
  }
};

}  // namespace graft
