#include "autograd/compress_saved.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_set>
#include <mutex>
#include <tuple>
#include <utility>

#include "autograd/autograd_meta.h"
#include "ops/ops.h"
#include "runtime/memory_format.h"
#include "runtime/storage.h"

namespace graft::autograd {

namespace {

// A leaf that requires grad (a parameter, registered or captured), or a view of one: its storage is
// the model's, held before the step and after it.
bool leaf_storage(const Tensor& t) {
  const AutogradMeta* m = get_meta(t);
  if (m == nullptr) return false;
  if (m->requires_grad_ && !m->grad_fn_) return true;
  if (!m->is_view_ || !m->base_.defined()) return false;
  const AutogradMeta* b = get_meta(m->base_);
  return b != nullptr && b->requires_grad_ && !b->grad_fn_;
}

enum class Form : uint8_t { kPlain, kBf16, kInt8, kMask };

// What a pack call keeps. kPlain: `a` is the tensor itself (version checked at unpack); kBf16: `a`
// the bf16 copy; kInt8: `a` the codes and `b` the scales over channel `dim`; kMask: `a` the bits.
struct Encoded {
  Form form = Form::kPlain;
  Tensor a, b;
  int64_t dim = 0;
  DType dtype = kFloat32;
  Shape sizes;
  int64_t version = 0;
  Shape inverse;  // packed in its memory order (stride_order, memory_order): permute the decoded one by this
};
using EncodedPtr = std::shared_ptr<const Encoded>;

// A packed storage region, by identity: the storage (weakly, so a freed and reused address can
// never match), its version, and the geometry and dtype of the view.
struct RegionKey {
  const Storage* storage;
  int64_t version, offset;
  Shape sizes, strides;
  DType dtype;
  Form form;
  bool operator<(const RegionKey& o) const {
    return std::tie(storage, version, offset, sizes, strides, dtype, form) <
           std::tie(o.storage, o.version, o.offset, o.sizes, o.strides, o.dtype, o.form);
  }
};
struct RegionEntry {
  std::weak_ptr<Storage> storage;
  std::weak_ptr<const Encoded> packed;
};

// int8's channel dim: 1 for [N, C, ...] activations of 4 or more dims (convolutions), the last
// otherwise ([N, F], [B, T, C]: features).
int64_t channel_dim(const Tensor& t) { return t.dim() >= 4 ? 1 : t.dim() - 1; }

// t's dims outermost to innermost in memory (by stride), for any strided tensor, dense or not;
// empty when t is contiguous or already in that order. bf16 packs every non-contiguous save so (a
// head's view of a fused qkv projection): the copy reads runs of memory in order and the decoded
// tensor, permuted back, is laid out in t's order (without its gaps). A view of q, k or v decoded
// row-major made sdpa's gradients row-major in [B, H, L, E], which the heads' merge could not view:
// a clone per tensor, and a gather by 16 values per pack (93 us against 8 in order, for a ViT's
// [128, 4, 17, 16] query).
Shape stride_order(const Tensor& t) {
  if (t.is_contiguous()) return {};
  Shape order(static_cast<size_t>(t.dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int64_t>(i)) return order;
  return {};
}
// The same order for a dense but non-contiguous tensor (a channels-last activation), where
// t.permute(order) is contiguous: the codecs whose kernels read and write row-major (masks, int8)
// then pack memory in order, and the decoded tensor permuted back has t's strides again. A relu's
// in-place backward needs the mask in the gradient's layout; without this a channels-last CNN paid
// an out-of-place threshold_backward, a whole activation, at its peak. Empty when t is not dense.
Shape memory_order(const Tensor& t) {
  return is_non_overlapping_and_dense(t.sizes(), t.strides()) ? stride_order(t) : Shape{};
}
Shape inverse_of(const Shape& order) {
  Shape inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return inv;
}

[[noreturn]] void modified_error(const Encoded& e, int64_t now) {
  GRAFT_ERROR("one of the variables needed for gradient computation has been modified by an inplace operation: [",
              e.a.device().is_cuda() ? "CUDA" : "", dtype_type_name(e.dtype), " ", shape_str(e.sizes),
              "] is at version ", now, "; expected version ", e.version,
              " instead (saved under CompressSaved, which kept it exactly). Hint: clone it before the in-place op.");
}

}  // namespace

struct CompressSaved::State {
  CompressOptions options;
  mutable std::mutex mu;  // stats, cache and the rounding counter (pack runs on any thread)
  CompressStats stats;
  std::vector<CompressDecision> decisions;
  const char* why = "kept";  // form_for's reason, for the record
  std::map<RegionKey, RegionEntry> cache;
  std::unordered_set<const Storage*> kept_storages;  // for bytes_kept (alive: the packings hold them)
  size_t sweep_at = 64;
  uint64_t rounding_offset = 0;  // Philox blocks used by stochastic rounding so far

  explicit State(CompressOptions o) : options(o) {}

  Form form_for(const Tensor& t, const SaveSite* site) {
    why = "kept";
    if (!site || site->tolerance == SaveTolerance::kExact) return Form::kPlain;
    const bool parameter = site->from_parameter();
    if (parameter || site->from_softmax()) {
      ++stats.exempt;
      why = parameter ? "exempt: parameter" : "exempt: softmax output";
      return Form::kPlain;
    }
    if (site->tolerance == SaveTolerance::kSignOnly) return options.sign_masks ? Form::kMask : Form::kPlain;
    const bool floating = is_floating(t.dtype());
    switch (options.codec) {
      case SavedCodec::kNone: return Form::kPlain;
      case SavedCodec::kBf16:
        if (!floating) break;
        return is_reduced_floating(t.dtype()) ? Form::kPlain : Form::kBf16;
      case SavedCodec::kInt8:
        if (!floating || t.dim() == 0) break;
        return Form::kInt8;
    }
    if (options.codec != SavedCodec::kNone) {
      ++stats.exempt;
      why = "exempt: dtype";
    }
    return Form::kPlain;
  }

  void note(const Tensor& t, const char* action) {
    if (!options.record) return;
    const SaveSite* site = current_save_site();
    decisions.push_back(CompressDecision{site && site->node ? site->node->name() : std::string(),
                                         site ? site->tolerance : SaveTolerance::kExact, action, t.sizes(),
                                         t.dtype()});
  }

  EncodedPtr encode(const Tensor& saved, Form form) {
    auto e = std::make_shared<Encoded>();
    e->form = form;
    e->dtype = saved.dtype();
    Tensor t = saved;
    if (form == Form::kMask || form == Form::kInt8) {
      const Shape order = memory_order(saved);
      if (!order.empty()) {
        Tensor p = ops::permute(saved, order);
        if (p.is_contiguous()) {
          t = p;
          e->inverse = inverse_of(order);
        }
      }
    } else if (form == Form::kBf16) {
      if (const Shape order = stride_order(saved); !order.empty()) {
        t = ops::permute(saved, order);
        e->inverse = inverse_of(order);
      }
    }
    e->sizes = t.sizes();
    switch (form) {
      case Form::kPlain:
        e->a = t;
        e->version = t.version();
        break;
      case Form::kBf16: e->a = ops::_to_copy(t, kBFloat16, t.device()); break;
      case Form::kMask: e->a = ops::_pack_sign_bits(t); break;
      case Form::kInt8: {
        e->dim = channel_dim(saved);
        if (!e->inverse.empty()) e->dim = e->inverse[static_cast<size_t>(e->dim)];  // its place in t
        int64_t seed = -1, offset = 0;
        if (options.stochastic_rounding) {
          // A key below 2^63 (the op's seed is an int64, negative meaning "to nearest").
          seed = static_cast<int64_t>(options.seed & 0x7fffffffffffffffULL);
          offset = static_cast<int64_t>(rounding_offset);
          rounding_offset += static_cast<uint64_t>((t.numel() + 3) / 4);
        }
        std::vector<Tensor> qs = ops::_quantize_int8(t, e->dim, seed, offset);
        e->a = qs[0];
        e->b = qs[1];
        break;
      }
    }
    return e;
  }

  void sweep() {
    for (auto it = cache.begin(); it != cache.end();)
      it = it->second.packed.expired() || it->second.storage.expired() ? cache.erase(it) : std::next(it);
    sweep_at = std::max<size_t>(64, 2 * cache.size());
  }

  EncodedPtr pack(const Tensor& t) {
    std::lock_guard<std::mutex> lock(mu);
    const auto t0 = std::chrono::steady_clock::now();
    struct Timer {
      double& total;
      std::chrono::steady_clock::time_point t0;
      ~Timer() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    } timer{stats.pack_seconds, t0};
    ++stats.saves;
    const SaveSite* site = current_save_site();
    const Form form = form_for(t, site);
    if (form == Form::kPlain) {
      ++stats.kept;
      note(t, why);
      // A parameter's storage (or a view's of one), from any slot: a weight saved for the input's
      // gradient is the model's, not an activation. A cast of one (autocast) is a new tensor the
      // step holds, and counts.
      const bool parameter = site && site->tensor && leaf_storage(*site->tensor);
      if (!parameter && kept_storages.insert(t.impl()->storage().get()).second)
        stats.bytes_kept += static_cast<int64_t>(t.impl()->storage()->nbytes());
      return encode(t, form);
    }
    const std::shared_ptr<Storage>& storage = t.impl()->storage();
    RegionKey key{storage.get(), t.version(), t.storage_offset(), t.sizes(), t.strides(), t.dtype(), form};
    if (auto it = cache.find(key); it != cache.end()) {
      if (auto hit = it->second.packed.lock(); hit && !it->second.storage.expired()) {
        ++stats.deduplicated;
        note(t, "deduplicated");
        return hit;
      }
    }
    EncodedPtr e = encode(t, form);
    ++(form == Form::kMask ? stats.masks : stats.compressed);
    note(t, form == Form::kMask ? "mask" : form == Form::kBf16 ? "bf16" : "int8");
    stats.bytes_in += static_cast<int64_t>(t.nbytes());
    stats.bytes_out += static_cast<int64_t>(e->a.nbytes() + (e->b.defined() ? e->b.nbytes() : 0));
    cache[key] = RegionEntry{storage, e};
    if (cache.size() >= sweep_at) sweep();
    return e;
  }
};

const char* codec_name(SavedCodec c) {
  switch (c) {
    case SavedCodec::kNone: return "none";
    case SavedCodec::kBf16: return "bf16";
    case SavedCodec::kInt8: return "int8";
  }
  return "?";
}

SavedCodec parse_saved_codec(std::string_view name) {
  if (name == "none") return SavedCodec::kNone;
  if (name == "bf16") return SavedCodec::kBf16;
  if (name == "int8") return SavedCodec::kInt8;
  GRAFT_ERROR("unknown saved-tensor codec '", std::string(name), "' (expected none, bf16 or int8)");
}

namespace {

Tensor decode(const Encoded& e) {
  switch (e.form) {
    case Form::kPlain: {
      const int64_t now = e.a.version();
      if (now != e.version) modified_error(e, now);
      return e.a;
    }
    case Form::kBf16: {
      Tensor r = ops::_to_copy(e.a, e.dtype, e.a.device());
      return e.inverse.empty() ? r : ops::permute(r, e.inverse);
    }
    case Form::kMask: {
      // As bool: the sign-only slots' rules take one (SavedVariable), a quarter of a float mask.
      Tensor r = ops::_unpack_sign_bits(e.a, e.sizes, kBool);
      return e.inverse.empty() ? r : ops::permute(r, e.inverse);
    }
    case Form::kInt8: {
      Tensor r = ops::_dequantize_int8(e.a, e.b, e.dim, e.dtype);
      return e.inverse.empty() ? r : ops::permute(r, e.inverse);
    }
  }
  return Tensor();
}

}  // namespace

CompressSaved::CompressSaved(CompressOptions options) : CompressSaved(std::make_shared<State>(options)) {}

CompressSaved::CompressSaved(std::shared_ptr<State> state)
    : SavedTensorsHooks([state](const Tensor& t) -> Packed { return state->pack(t); },
                        [state](const Packed& p) -> Tensor {
                          const auto t0 = std::chrono::steady_clock::now();
                          Tensor r = decode(*std::any_cast<const EncodedPtr&>(p));
                          const double dt =
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                          std::lock_guard<std::mutex> lock(state->mu);
                          state->stats.unpack_seconds += dt;
                          return r;
                        },
                        /*check_unpacked_metadata=*/true, "compress", /*prefetchable=*/true),
      state_(std::move(state)) {}

std::vector<CompressDecision> CompressSaved::decisions() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->decisions;
}

CompressStats CompressSaved::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace graft::autograd
