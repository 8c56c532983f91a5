#include "runtime/error.h"

namespace graft::detail {
void throw_error(const std::string& msg) { throw Error(msg); }
}  // namespace graft::detail
