#pragma once
// graft::Error is the one exception type of the framework. Every check that can fail on user
// input throws it with a message that names the op and the offending shapes, dtypes and devices,
// so a user never has to guess which call was wrong.
#include <sstream>
#include <stdexcept>
#include <string>

namespace graft {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const std::string& msg);
}  // namespace detail

}  // namespace graft

// GRAFT_CHECK(cond, parts...) throws graft::Error(parts...) when cond is false. The message parts
// are only formatted on failure, so a check costs one branch on the hot path.
#define GRAFT_CHECK(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) [[unlikely]]                                               \
      ::graft::detail::throw_error(::graft::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define GRAFT_ERROR(...) ::graft::detail::throw_error(::graft::detail::str_cat(__VA_ARGS__))
