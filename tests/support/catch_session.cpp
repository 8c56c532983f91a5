// The one translation unit with Catch2's implementation (see catch_session.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_session.h"

namespace graft::test {

int run_catch_session(int argc, char* argv[], const std::vector<std::string>& tests_or_tags) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (!tests_or_tags.empty()) session.configData().testsOrTags = tests_or_tags;
  return session.run();
}

}  // namespace graft::test
