#pragma once
// GRADCHECK / GRADGRADCHECK for the hand-written gradcheck suites (compositions, in-place ops on
// views, many shapes per op). The coverage of the op registry is the op table's business: every
// declared differentiable op has `check:` cases (codegen/ops/*.yaml) that op_cases.cpp runs.
#include <catch2/catch.hpp>

#include "graft.h"

// Runs gradcheck with a name in the failure message.
#define GRADCHECK(what, ...)                                 \
  do {                                                       \
    INFO(what);                                              \
    CHECK(::graft::autograd::gradcheck(__VA_ARGS__));        \
  } while (0)
#define GRADGRADCHECK(what, ...)                             \
  do {                                                       \
    INFO(what);                                              \
    CHECK(::graft::autograd::gradgradcheck(__VA_ARGS__));    \
  } while (0)
