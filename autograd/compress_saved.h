#pragma once
// CompressSaved: saved-tensor hooks that keep activations in fewer bits (issue 32's codecs).
//
// Inside the scope, each tensor an op saves for backward is packed by what its rule tolerates
// (SaveTolerance, declared per op with `compress:` in codegen/ops/*.yaml):
// - kSignOnly (relu's result, dropout's mask): a 1-bit mask, unpacked as a bool mask (a quarter
//   of the float32 bytes), which the engine accepts for a sign-only slot (SavedVariable) and
//   relu's and dropout's rules read as such (relu's in place through _keep_where_).
//   The rule reads only `x <= 0`, so the gradient is bit-identical to the uncompressed one.
// - kLossy (a linear's or convolution's input, gelu's and tanh's, layer norm's input, attention's
//   q, k, v): the options' codec, bf16 (round to nearest even) or int8 (a scale per channel,
//   round to nearest even or stochastic rounding). The gradient is an approximation.
// - kExact (everything else): kept as it is, with no copy.
//
// Invariants:
// 1. Exempt, whatever the slot declares: parameters, views of them and autocast's casts of them;
//    integer and bool tensors (under a lossy codec); 0-d tensors under int8. Softmax and
//    log-softmax outputs, statistics and indices are exempt by their ops' declarations (not listed
//    in `compress:`), so a user hook that only compresses can never reach them.
// 2. Packing reads the tensor once per codec and never writes it. A storage region saved by several
//    ops (same storage, version, offset, sizes, strides) under the same codec is packed once: later
//    saves share the first packing (deduplication), which is what keeps a tensor saved by two ops
//    from costing twice. The cache holds weak references only, so it never extends a lifetime.
// 3. A tensor kept exactly is checked at unpack against its version at save time, with the
//    engine's own "modified by an inplace operation" error: compressing a neighbour must not lose
//    the check for the tensors kept as they are. A compressed tensor is a copy made at save time.
// 4. Unpacking is a pure function of the packed value, so the engine may run it ahead on its
//    prefetch thread (prefetchable).
// 5. Non-finite values survive every codec: bf16 keeps inf and NaN; int8 has codes for +inf, -inf
//    and NaN (ops/codec_math.h); a mask keeps NaN as "pass the gradient", as threshold_backward does.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/saved_tensor_hooks.h"

namespace graft::autograd {

enum class SavedCodec : uint8_t { kNone, kBf16, kInt8 };
const char* codec_name(SavedCodec c);  // "none", "bf16", "int8"
// "none" | "bf16" | "int8"; anything else is a graft::Error that lists them.
SavedCodec parse_saved_codec(std::string_view name);

struct CompressOptions {
  SavedCodec codec = SavedCodec::kBf16;  // for tensors whose slot is kLossy
  bool sign_masks = true;                // kSignOnly slots as 1-bit masks
  bool stochastic_rounding = false;      // int8: floor(x / scale + u) in place of round to nearest
  uint64_t seed = 0;                     // stochastic rounding's Philox key
  bool record = false;                   // keep one CompressDecision per save (decisions())
};

// What happened to one saved tensor, for tests and the planner's table.
struct CompressDecision {
  std::string node;    // the saving node's name ("" outside a node)
  SaveTolerance tolerance = SaveTolerance::kExact;
  std::string action;  // "kept", "exempt: parameter", "exempt: softmax output", "exempt: dtype",
                       // "bf16", "int8", "mask", "deduplicated"
  Shape shape;
  DType dtype = kFloat32;
};

// Counts since the scope opened (bytes as the tensors' element bytes; a deduplicated save adds
// nothing to either byte count).
struct CompressStats {
  int64_t saves = 0;         // pack calls
  int64_t compressed = 0;    // stored by the lossy codec
  int64_t masks = 0;         // stored as 1-bit masks
  int64_t kept = 0;          // stored exactly (exact slots, exempt tensors, codec none)
  int64_t deduplicated = 0;  // answered by an earlier packing of the same tensor
  int64_t exempt = 0;        // of `kept`: tolerant slots refused by invariant 1
  int64_t bytes_in = 0;      // of the tensors compressed or masked
  int64_t bytes_out = 0;     // what their packings hold
  int64_t bytes_kept = 0;    // storages kept exactly, parameters excluded, each counted once
  double pack_seconds = 0;   // time spent packing (the codecs' forward cost)
  double unpack_seconds = 0; // time spent unpacking (their backward cost)
};

class CompressSaved : public SavedTensorsHooks {
 public:
  explicit CompressSaved(CompressOptions options = {});
  CompressStats stats() const;
  std::vector<CompressDecision> decisions() const;  // empty unless options.record

  struct State;

 private:
  explicit CompressSaved(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace graft::autograd
