#pragma once
// The float fallback that lets every op accept bfloat16 and float16: a kernel written for
// float32/float64 is registered behind reduced_precision_fallback (codegen: every non-elementwise
// kernel unless its declaration says `reduced: native`), which, when a 16-bit float tensor is
// among the arguments, runs the kernel on float32 copies and rounds its floating results once.
//
// Invariants:
// 1. Semantics are "load, compute in float, store with one rounding": a float32 copy of a 16-bit
//    tensor is exact, and each float32 result is rounded once to the arguments' 16-bit dtype.
//    Non-floating results (indices, counts, masks) pass through, and so do float results when the
//    call also has float32/float64 tensors (the op promotes to them, as cat(bf16, f32) is float32)
//    or names a dtype argument (the caller asked for that dtype).
// 2. Arguments the schema marks written `(a!)` are written back into the caller's tensor (one
//    rounding), and a result that was the float copy of such an argument is replaced by the
//    argument itself, so in-place ops return self and the dispatcher bumps self's version.
// 3. No 16-bit tensor among the arguments: the kernel runs directly (one scan of the stack).
// 4. Arguments of two different 16-bit dtypes are left alone: the kernel's own dtype checks
//    report them, as PyTorch reports a bfloat16/float16 mix.
// 5. Kernels with a native 16-bit path (oneDNN's bf16 matmul and convolution, the elementwise
//    ops, copies, fills, random fills, joins and index ops) are not behind this: it is the
//    correct, slower path for the rest, and `graft info --ops` says which ops take it.
#include "runtime/dispatcher.h"

namespace graft::kernels {

OpResult reduced_precision_fallback(const Op& op, Stack& args, BoxedKernel kernel);

}  // namespace graft::kernels
