#include "ops/factory_plan.h"

#include <cmath>

#include "runtime/error.h"

namespace graft::kernels {

int64_t plan_arange(double start, double end, double step) {
  GRAFT_CHECK(step != 0, "arange: step must be nonzero");
  GRAFT_CHECK(std::isfinite(start) && std::isfinite(end), "arange: unsupported range [", start, ", ", end, ")");
  GRAFT_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: upper bound and larger bound ",
              "inconsistent with step sign (start ", start, ", end ", end, ", step ", step, ")");
  return static_cast<int64_t>(std::ceil((end - start) / step));
}

}  // namespace graft::kernels
