#pragma once
// Option<E>: an op's option argument (gelu's `approximate`, a loss's `reduction`) as the API takes
// it: the enum itself, or its name as PyTorch spells it (`gelu(x, "tanh")`).
//
// Invariants:
// 1. A name is looked up once, where the Option is made; everything after the API boundary (the
//    dispatcher, dispatch modes, both devices' kernels, a rule's Saved struct) holds the enum.
// 2. An unknown name does not throw where it is converted (that code cannot know the op); it is
//    kept, and value(op) throws an error that names the op, the argument and every valid name
//    ("gelu: approximate must be none or tanh, got 'fast'").
//    The generated ops:: functions call value(op) before dispatching, so no kernel sees it.
#include <optional>
#include <string>
#include <string_view>

#include "runtime/error.h"
#include "runtime/op_options.h"

namespace graft {

template <class E>
class Option {
 public:
  constexpr Option(E v) : value_(v) {}  // NOLINT: implicit, as the enum itself
  Option(std::string_view name) {       // NOLINT: implicit, as PyTorch's strings
    const auto& names = OptionTraits<E>::names;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) {
        value_ = static_cast<E>(i);
        return;
      }
    unknown_ = std::string(name);
  }
  Option(const char* name) : Option(std::string_view(name)) {}         // NOLINT
  Option(const std::string& name) : Option(std::string_view(name)) {}  // NOLINT

  // The enum; throws for an unknown name, naming `op`.
  E value(const char* op) const {
    if (unknown_) [[unlikely]] {
      const auto& names = OptionTraits<E>::names;
      std::string valid;
      for (size_t i = 0; i < names.size(); ++i)
        valid += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
      detail::throw_error(detail::str_cat(op, ": ", OptionTraits<E>::arg, " must be ", valid, ", got '", *unknown_, "'"));
    }
    return value_;
  }
  bool operator==(E e) const { return !unknown_ && value_ == e; }

 private:
  E value_{};
  std::optional<std::string> unknown_;
};

// The PyTorch name of an option value ("tanh").
template <class E>
std::string_view option_name(E e) {
  return OptionTraits<E>::names[static_cast<size_t>(e)];
}

}  // namespace graft
