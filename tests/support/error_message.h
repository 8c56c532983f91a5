#pragma once
// For tests of error paths that match several parts of one message (CHECK_THROWS_WITH takes one
// matcher per call, and a wrong exception type would be reported only as "unexpected exception").
#include <string>

#include "runtime/error.h"

namespace graft::test {

// The what() of the graft::Error that f() throws, or a marker saying what happened instead.
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const graft::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a graft::Error: ") + e.what() + ">";
  }
  return "<no exception thrown>";
}

}  // namespace graft::test
