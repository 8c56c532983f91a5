#pragma once
// Every elementwise formula of the op table (codegen/ops/*.yaml), for the generated kernels of
// both devices: unary_math.h and binary_math.h.
#include "ops/math/binary_math.h"
#include "ops/math/unary_math.h"
