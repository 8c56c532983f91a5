// Catch2 main for tests that run under `mpirun -np N`: dist::init() before the session, and a
// listener that ends the whole job on the first failed assertion. A rank that failed and went on
// would issue a different sequence of collectives than the others and leave them waiting forever;
// MPI_Abort turns that hang into a failure meson sees at once.
// The listener needs Catch2's reporter interfaces, not its implementation (support/catch_session.h).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <cstdio>

#include "dist/dist.h"
#include "support/catch_session.h"

namespace {

struct AbortOnFailure : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    if (r.isOk() || graft::dist::world_size() <= 1) return true;
    std::fprintf(stderr, "rank %d: %s:%zu: FAILED %s\n  with expansion: %s\n", graft::dist::rank(),
                 r.getSourceInfo().file, r.getSourceInfo().line, r.getExpressionInMacro().c_str(),
                 r.getExpandedExpression().c_str());
    if (r.hasMessage()) std::fprintf(stderr, "  message: %s\n", r.getMessage().c_str());
    for (const auto& m : stats.infoMessages) std::fprintf(stderr, "  info: %s\n", m.message.c_str());
    std::fflush(stderr);
    graft::dist::abort(1);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(AbortOnFailure)

int main(int argc, char* argv[]) {
  graft::dist::init();
  // Only rank 0 reports passing runs; every rank prints its own failure (see the listener).
  int rc = graft::test::run_catch_session(argc, argv);
  graft::dist::finalize();
  return rc;
}
