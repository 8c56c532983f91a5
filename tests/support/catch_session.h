// Catch2's implementation is compiled once, in catch_session.cpp, and linked into every test
// executable through test_support_dep. Every main (catch_main.cpp, support/gpu_main.cpp,
// dist/dist_catch_main.cpp, and the test sources with their own) calls run_catch_session instead
// of defining CATCH_CONFIG_MAIN or CATCH_CONFIG_RUNNER. Each of those definitions compiled the
// whole Catch2 implementation again: about 2 minutes per copy in the sanitizer build.
#pragma once

#include <string>
#include <vector>

namespace graft::test {

// Runs Catch2's session on the command line. A non-empty `tests_or_tags` replaces the test
// specification the command line gave (as Catch's own `session.configData().testsOrTags`).
int run_catch_session(int argc, char* argv[], const std::vector<std::string>& tests_or_tags = {});

}  // namespace graft::test
