#pragma once
// The autograd layer's public headers.
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/multi_grad_hook.h"
#include "autograd/node.h"
#include "autograd/save_on_disk.h"
#include "autograd/saved_tensor_hooks.h"
#include "autograd/unpack_prefetch.h"
#include "autograd/allow_mutation.h"
#include "autograd/checkpoint.h"
#include "autograd/checkpoint_rows.h"
#include "autograd/compress_saved.h"
#include "autograd/anomaly_mode.h"
#include "autograd/autocast.h"
#include "autograd/graph_export.h"

namespace graft::autograd {
using graft::autograd::grad_accumulator;
}
