// 2-D convolution (NCHW, or unbatched CHW) and its two backward kernels.
//
//   conv2d:                  input [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] -> out [N, O, OH, OW]
//   conv2d_backward_input:   grad_out [N, O, OH, OW], weight                              -> grad_input [N, C, H, W]
//   conv2d_backward_weight:  grad_out [N, O, OH, OW], input                               -> grad_weight [O, C/groups, kH, kW]
//   OH = (H + 2*padH - dilH*(kH-1) - 1) / strideH + 1   (floor), likewise OW.
// The bias gradient is grad_out summed over N, OH, OW: the caller's reduction.
//
// Layout: each kernel picks NCHW or NHWC (channels-last) as PyTorch does: NHWC when one of its
// tensor operands has channels-last strides (input or weight forward, grad_out or weight for the
// data gradient, grad_out or input for the weight gradient). Its activation outputs then come
// back channels-last too, so a channels-last network stays channels-last from layer to layer.
//
// float32 runs on oneDNN. For NCHW, its fast kernels want channel-blocked layouts, so the
// primitive is created with format `any` and the plain tensors are reordered in and out around it.
// For NHWC the primitive runs on graft's buffers directly (oneDNN convolves nhwc natively): no
// activation reorder at all. The weights are still reordered into the primitive's blocked layout;
// that copy is cached per weight storage and version (WeightCache), so it is redone only after the
// weights change (optimizer.step()). float64 (gradchecks) runs on the direct loops below.
//
// bfloat16 runs on oneDNN's bf16 primitives (f32 accumulation, one rounding of each result; the
// weight gradient comes back in bf16, as PyTorch's), the same code with bf16 descriptors, and the
// weight cache holds bf16 copies. Where oneDNN has no bf16 kernel for bf16 hardware (oneDNN 2.6
// under ONEDNN_MAX_CPU_ISA=AVX2 has none, under AVX512_CORE only a slow emulation), or its kernel
// is no faster than float32 (Intel without AMX; see dnnl_utils::use_bf16_primitives), or it cannot
// create one for a shape, and always for float16 (oneDNN 2.6 has no f16 convolution for this CPU),
// the operands are converted to float32, the float32 primitive runs and each result is rounded
// once (run_conv).
#include <algorithm>
#include <list>
#include <mutex>

#include "ops/cpu_kernels.h"
#include "ops/cpu_parts.h"
#include "ops/dnnl_utils.h"
#include "ops/conv_few_channels.h"
#include "ops/conv_pool_params.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

namespace du = dnnl_utils;

// ---- float32 / bfloat16: oneDNN ----

enum : int64_t { kKeyConvFwd = 2, kKeyConvBwdData = 3, kKeyConvBwdWeights = 4 };

// One convolution primitive with the reorders between graft's plain layouts and the layouts the
// primitive picked. A reorder is absent (empty primitive) where the layouts already agree.
struct ConvPrimitive : du::CachedPrimitive {
  struct Operand {
    int arg = 0;
    dnnl::memory::desc plain, inner;  // graft's layout / the primitive's layout
    dnnl::primitive reorder;          // plain -> inner for inputs, inner -> plain for the output
    dnnl::memory::desc reorder_scratch;
    bool needs_reorder() const { return plain != inner; }
  };
  Operand in0, in1, out;
  dnnl::memory::desc bias_md;  // forward with bias only
};

// The primitive-layout copies of weights, so a weight that did not change since the last call is
// not reordered again.
// Invariants:
// - An entry is keyed by the weight's storage (by identity: a weak_ptr, compared by owner, so a
//   new storage at a freed one's address never matches), its offset and version, and the target
//   descriptor (dims and layout). Any write to the weight through any view bumps the storage's
//   version, so a stale copy is never returned.
// - Entries are immutable and handed out as shared_ptr<const>: an entry evicted while another
//   thread convolves with it stays alive until that call ends.
// - At most kWeightCacheSize entries, least recently used dropped first, and at most one per
//   weight and layout: versions only grow, so once a newer copy is made an older one can never
//   match again, and it is dropped then, as is every entry of a freed storage. Otherwise each
//   optimizer step would leave one stale copy per weight until 32 had piled up (2.2 MiB for the
//   Fashion-MNIST CNN), memory the step's budget (nn::plan_checkpoint) does not see.
class WeightCache {
 public:
  struct Entry {
    std::weak_ptr<Storage> storage;
    int64_t offset = 0, version = 0;
    dnnl::memory::desc inner;
    Tensor buffer;  // the reordered weights: inner.get_size() bytes, rounded up to whole floats
  };
  static constexpr size_t kWeightCacheSize = 32;

  // The weights `w` (plain, contiguous) in `o.inner`, from the cache or reordered now.
  std::shared_ptr<const Entry> get(const ConvPrimitive::Operand& o, const Tensor& w) {
    const std::shared_ptr<Storage>& st = w.impl()->storage();
    int64_t version = w.impl()->version(), offset = w.storage_offset();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const Entry& e = **it;
        bool same = !e.storage.owner_before(st) && !st.owner_before(e.storage) && !e.storage.expired();
        if (same && e.offset == offset && e.version == version && e.inner == o.inner) {
          entries_.splice(entries_.begin(), entries_, it);
          ++hits_;
          return entries_.front();
        }
      }
    }
    auto e = std::make_shared<Entry>();
    e->storage = st;
    e->offset = offset;
    e->version = version;
    e->inner = o.inner;
    e->buffer = new_tensor({static_cast<int64_t>((o.inner.get_size() + 3) / 4)}, kFloat32, w.device());
    dnnl::memory plain = du::make_memory(o.plain, w.data_ptr());
    dnnl::memory inner = du::make_memory(o.inner, e->buffer.data_ptr());
    du::execute(o.reorder, o.reorder_scratch, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, inner}});
    std::lock_guard<std::mutex> lock(mu_);
    ++misses_;
    entries_.remove_if([&](const std::shared_ptr<const Entry>& old) {
      if (old->storage.expired()) return true;
      const bool same = !old->storage.owner_before(st) && !st.owner_before(old->storage);
      return same && old->offset == offset && old->inner == o.inner && old->version < version;
    });
    entries_.push_front(e);
    if (entries_.size() > kWeightCacheSize) entries_.pop_back();
    return e;
  }
  WeightCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, static_cast<int64_t>(entries_.size())};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
    hits_ = misses_ = 0;
  }

 private:
  std::mutex mu_;
  std::list<std::shared_ptr<const Entry>> entries_;  // most recently used first
  int64_t hits_ = 0, misses_ = 0;
};

WeightCache& weight_cache() {
  // Leaked, like the primitive cache: a kernel may still run from another static's destructor.
  static WeightCache* c = new WeightCache;
  return *c;
}

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, dnnl::memory::data_type dt, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dt, tag);
}

void set_operand(ConvPrimitive::Operand& o, int arg, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner,
                 bool is_output) {
  o.arg = arg;
  o.plain = plain;
  o.inner = inner;
  if (!o.needs_reorder()) return;
  dnnl::reorder::primitive_desc pd = is_output
      ? dnnl::reorder::primitive_desc(du::cpu_engine(), inner, du::cpu_engine(), plain, du::default_attr())
      : dnnl::reorder::primitive_desc(du::cpu_engine(), plain, du::cpu_engine(), inner, du::default_attr());
  o.reorder = dnnl::reorder(pd);
  o.reorder_scratch = pd.scratchpad_desc();
}

std::shared_ptr<const ConvPrimitive> conv_primitive(int64_t kind, DType dtype, const ConvParams& p, bool has_bias,
                                                    bool nhwc) {
  du::PrimitiveKey key(kind);
  key.add(static_cast<int64_t>(dtype)).add(max_threads()).add(has_bias ? 1 : 0).add(nhwc ? 1 : 0);
  for (int64_t v : {p.N, p.C, p.H, p.W, p.O, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.groups}) key.add(v);
  return du::get_or_create_as<ConvPrimitive>(key, [&] {
    using tag = dnnl::memory::format_tag;
    using dims = dnnl::memory::dims;
    dims src{p.N, p.C, p.H, p.W}, dst{p.N, p.O, p.OH, p.OW};
    dims wei = p.groups > 1 ? dims{p.groups, p.O / p.groups, p.C / p.groups, p.kh, p.kw} : dims{p.O, p.C, p.kh, p.kw};
    tag wei_tag = p.groups > 1 ? tag::goihw : tag::oihw;
    // Blocked layouts make the forward and weight-gradient kernels several times faster; the
    // data-gradient kernel for very few input channels (a network's first layer) is faster on
    // plain layouts, but only for NCHW activations: with NHWC ones and plain weights oneDNN 2.6
    // falls back to its reference kernel (`ref:any`), 20-300x slower (a [64, 3, 3, 3] data gradient
    // on 128 32x32 images: 318 ms in float32 against 8.9 ms with blocked weights).
    // Channels-last activations are convolved as they lie (nhwc), so only the weights move.
    bool blocked = kind != kKeyConvBwdData || p.C / p.groups >= 8 || nhwc;
    tag plain_act = nhwc ? tag::nhwc : tag::nchw;
    tag act = nhwc ? tag::nhwc : blocked ? tag::any : tag::nchw, wt = blocked ? tag::any : wei_tag;
    const dnnl::memory::data_type dt = du::to_dnnl(dtype);
    auto src_md = plain_md(src, dt, act), dst_md = plain_md(dst, dt, act), wei_md = plain_md(wei, dt, wt);
    auto bias_md = has_bias ? plain_md({p.O}, dt, tag::x) : dnnl::memory::desc();
    dims strides{p.sh, p.sw}, dil{p.dh - 1, p.dw - 1}, pad{p.ph, p.pw};
    // Right padding equal to the left: oneDNN then derives the same floor-rounded output size.
    dnnl::convolution_forward::desc fwd_d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                          src_md, wei_md, bias_md, dst_md, strides, dil, pad, pad);
    auto attr = du::default_attr();
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd_d, attr, du::cpu_engine());
    auto cp = std::make_shared<ConvPrimitive>();
    auto src_plain = plain_md(src, dt, plain_act), dst_plain = plain_md(dst, dt, plain_act),
         wei_plain = plain_md(wei, dt, wei_tag);
    if (kind == kKeyConvFwd) {
      set_operand(cp->in0, DNNL_ARG_SRC, src_plain, fwd_pd.src_desc(), false);
      set_operand(cp->in1, DNNL_ARG_WEIGHTS, wei_plain, fwd_pd.weights_desc(), false);
      set_operand(cp->out, DNNL_ARG_DST, dst_plain, fwd_pd.dst_desc(), true);
      cp->bias_md = bias_md;
      cp->prim = dnnl::convolution_forward(fwd_pd);
      cp->scratchpad = fwd_pd.scratchpad_desc();
    } else if (kind == kKeyConvBwdData) {
      dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, src_md, wei_md, dst_md, strides,
                                              dil, pad, pad);
      dnnl::convolution_backward_data::primitive_desc pd(d, attr, du::cpu_engine(), fwd_pd);
      set_operand(cp->in0, DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false);
      set_operand(cp->in1, DNNL_ARG_WEIGHTS, wei_plain, pd.weights_desc(), false);
      set_operand(cp->out, DNNL_ARG_DIFF_SRC, src_plain, pd.diff_src_desc(), true);
      cp->prim = dnnl::convolution_backward_data(pd);
      cp->scratchpad = pd.scratchpad_desc();
    } else {
      // With a bias, its gradient comes from the same pass over diff_dst (no separate sum).
      auto d = has_bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_md, wei_md,
                                                                   bias_md, dst_md, strides, dil, pad, pad)
                        : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_md, wei_md,
                                                                   dst_md, strides, dil, pad, pad);
      dnnl::convolution_backward_weights::primitive_desc pd(d, attr, du::cpu_engine(), fwd_pd);
      cp->bias_md = bias_md;
      set_operand(cp->in0, DNNL_ARG_SRC, src_plain, pd.src_desc(), false);
      set_operand(cp->in1, DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false);
      set_operand(cp->out, DNNL_ARG_DIFF_WEIGHTS, wei_plain, pd.diff_weights_desc(), true);
      cp->prim = dnnl::convolution_backward_weights(pd);
      cp->scratchpad = pd.scratchpad_desc();
    }
    return cp;
  });
}

// Runs the primitive on plain buffers of out's dtype (float32 or bfloat16): in0, in1 -> out (+ bias
// for forward). Activations are dense NCHW, or dense NHWC when `nhwc`; weights are contiguous.
// Returns false, having written nothing, when oneDNN cannot create a bfloat16 convolution; a
// float32 failure is an error.
bool run_conv_dnnl(int64_t kind, const ConvParams& p, const Tensor& in0, const Tensor& in1, const Tensor& out,
                   const Tensor& bias, bool nhwc) {
  std::shared_ptr<const ConvPrimitive> cp;
  try {
    cp = conv_primitive(kind, out.dtype(), p, bias.defined(), nhwc);
  } catch (const dnnl::error& e) {
    if (out.dtype() != kFloat32) return false;
    GRAFT_ERROR("conv2d: oneDNN could not create a convolution for input ", shape_str(p.input_sizes()),
                " and weight ", shape_str(p.weight_sizes()), ": ", e.what());
  }
  // Work buffers: slots 1..3 of this thread (slot 0 is the scratchpad).
  auto input = [&](const ConvPrimitive::Operand& o, const Tensor& t, int slot) {
    dnnl::memory plain = du::make_memory(o.plain, t.data_ptr());
    if (!o.needs_reorder()) return plain;
    dnnl::memory inner = du::make_memory(o.inner, du::thread_buffer(slot, o.inner.get_size()));
    du::execute(o.reorder, o.reorder_scratch, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, inner}});
    return inner;
  };
  // The weights (in1 of forward and data gradient) come from the cache; the entry stays held
  // until the primitive has run.
  std::shared_ptr<const WeightCache::Entry> cached;
  auto weights = [&](const ConvPrimitive::Operand& o, const Tensor& w) {
    if (!o.needs_reorder()) return du::make_memory(o.plain, w.data_ptr());
    cached = weight_cache().get(o, w);
    return du::make_memory(o.inner, cached->buffer.data_ptr());
  };
  bool in1_is_weight = kind != kKeyConvBwdWeights;
  std::unordered_map<int, dnnl::memory> args{{cp->in0.arg, input(cp->in0, in0, 1)},
                                             {cp->in1.arg, in1_is_weight ? weights(cp->in1, in1) : input(cp->in1, in1, 2)}};
  dnnl::memory out_plain = du::make_memory(cp->out.plain, out.data_ptr());
  dnnl::memory out_inner =
      cp->out.needs_reorder() ? du::make_memory(cp->out.inner, du::thread_buffer(3, cp->out.inner.get_size())) : out_plain;
  args.emplace(cp->out.arg, out_inner);
  if (bias.defined())
    args.emplace(kind == kKeyConvBwdWeights ? DNNL_ARG_DIFF_BIAS : DNNL_ARG_BIAS,
                 du::make_memory(cp->bias_md, bias.data_ptr()));
  du::execute(*cp, std::move(args));
  if (cp->out.needs_reorder())
    du::execute(cp->out.reorder, cp->out.reorder_scratch, {{DNNL_ARG_FROM, out_inner}, {DNNL_ARG_TO, out_plain}});
  return true;
}

// A float32 copy of a 16-bit tensor in the same memory format (undefined stays undefined).
Tensor float_copy(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor f = new_tensor_in_format(t, MemoryFormat::Preserve, kFloat32, t.device());
  device_copy(f, t);
  return f;
}

// run_conv_dnnl in out's dtype where oneDNN has a primitive for it, else in float32 on converted
// copies with one rounding into `out` (float16 always; bfloat16 without oneDNN bf16 kernels).
void run_conv(int64_t kind, const ConvParams& p, const Tensor& in0, const Tensor& in1, const Tensor& out,
              const Tensor& bias, bool nhwc) {
  const DType dt = out.dtype();
  if (dt == kFloat32) {
    run_conv_dnnl(kind, p, in0, in1, out, bias, nhwc);
    return;
  }
  if (dt == kBFloat16 && du::use_bf16_primitives() && run_conv_dnnl(kind, p, in0, in1, out, bias, nhwc)) return;
  // The float path, a chunk of the batch at a time once the float32 copies of the activations (in0
  // and out, or in0 and in1 for the weight gradient) pass kFloatChunkValues (4 MiB), as the matmul
  // family's float path tiles its products (ops/linalg.cpp): whole float32 twins of a large layer
  // would sit on top of its 16-bit result.
  constexpr int64_t kFloatChunkValues = int64_t{1} << 20;
  const bool wgrad = kind == kKeyConvBwdWeights;
  const Tensor& act1 = wgrad ? in1 : out;  // the other batch-major tensor
  int64_t chunk = p.N;
  if (p.batched && p.N > 1) {
    const int64_t per_sample = std::max<int64_t>(1, (in0.numel() + act1.numel()) / p.N);
    const int64_t want = std::max<int64_t>(1, kFloatChunkValues / per_sample);
    const int64_t pieces = (p.N + want - 1) / want;
    chunk = (p.N + pieces - 1) / pieces;  // even chunks
  }
  auto part = [&](const Tensor& t, int64_t n0, int64_t len) { return len == p.N ? t : t.narrow(0, n0, len); };
  // Forward and data gradient: the weights (and forward's bias) converted once.
  Tensor fw = wgrad ? Tensor() : float_copy(in1), fbias = wgrad ? Tensor() : float_copy(bias);
  Tensor gw_sum, gb_sum;  // the weight gradient's float32 sums over the chunks
  for (int64_t n0 = 0; n0 < p.N; n0 += chunk) {
    const int64_t len = std::min(chunk, p.N - n0);
    ConvParams pc = p;
    pc.N = len;
    Tensor fin0 = float_copy(part(in0, n0, len));
    if (!wgrad) {
      Tensor o = part(out, n0, len);
      Tensor fo = new_tensor_in_format(o, MemoryFormat::Preserve, kFloat32, o.device());
      run_conv_dnnl(kind, pc, fin0, fw, fo, fbias, nhwc);
      device_copy(o, fo);
      continue;
    }
    Tensor gw = new_tensor(out.sizes(), kFloat32, out.device());
    Tensor gb = bias.defined() ? new_tensor(bias.sizes(), kFloat32, bias.device()) : Tensor();
    run_conv_dnnl(kind, pc, fin0, float_copy(part(in1, n0, len)), gw, gb, nhwc);
    if (!gw_sum.defined()) {
      gw_sum = gw;
      gb_sum = gb;
      continue;
    }
    // Weight-sized (small): plain loops on this thread.
    auto add_into = [](const Tensor& acc, const Tensor& x) {
      float* a = acc.data_ptr<float>();
      const float* b = x.data_ptr<float>();
      for (int64_t i = 0; i < acc.numel(); ++i) a[i] += b[i];
    };
    add_into(gw_sum, gw);
    if (gb.defined()) add_into(gb_sum, gb);
  }
  if (wgrad) {
    device_copy(out, gw_sum);
    if (bias.defined()) device_copy(bias, gb_sum);  // the bias's gradient, an output here
  }
}

// ---- patch embeddings: the weight gradient as one matrix product ----

// A convolution whose windows tile the input (kernel == stride, no padding, one group: a ViT's patch
// embedding) reads each input pixel at most once, so its weight gradient is one product with no
// overlap to sum:
//   patches[(n, oh, ow), (c, i, j)] = input[n, c, oh*kh + i, ow*kw + j]       [N*OH*OW, C*kh*kw]
//   gout[(n, oh, ow), o]            = grad_out[n, o, oh, ow]                   [N*OH*OW, O]
//   gw[o, (c, i, j)]                = (gout^T @ patches)[o, (c, i, j)]         [O, C*kh*kw]
// oneDNN 2.6's AMX weight-gradient kernel is pathological for such convolutions when the input has
// very few channels (one 16-wide AMX tile row per pixel, mostly empty). Measured on a Sapphire
// Rapids Xeon, 2 cores, batch 128 channels-last (graft's own timing, oneDNN -> this product):
//   [64, 1, 7, 7] on 28x28 (graft's ViT):     2.50 ms -> 0.14 ms   (float32 oneDNN: 0.12 ms)
//   [64, 1, 4, 4] on 28x28:                   1.18 ms -> 0.24 ms
//   [64, 3, 16, 16] on 224x224 (ViT-B/16):    70 ms   -> 35 ms
// Elsewhere oneDNN wins: float32 at every size, bf16 with 4 or more channels (the patch copy costs
// more than the kernel saves), 2x2 windows, and NCHW gradients of 3-channel inputs (which need a
// transposing copy: [96, 3, 4, 4] took 57 ms in oneDNN, 90 here). So the product runs only where it
// was measured to pay.
bool patch_weight_grad_pays(const ConvParams& p, const Tensor& grad_out) {
  const bool tiles = p.groups == 1 && p.sh == p.kh && p.sw == p.kw && p.ph == 0 && p.pw == 0 &&
                     (p.kh == 1 || p.dh == 1) && (p.kw == 1 || p.dw == 1);
  return tiles && grad_out.dtype() == kBFloat16 && du::amx_bf16() && p.C < 4 && p.kh * p.kw >= 16 &&
         (p.C == 1 || (grad_out.dim() == 4 && is_channels_last(grad_out)));
}

Tensor patch_weight_grad(const ConvParams& p, const Tensor& grad_out, const Tensor& input) {
  const int64_t rows = p.N * p.OH * p.OW, K = p.C * p.kh * p.kw;
  // Strides in elements; an unbatched (3-D) tensor reads as N == 1.
  auto st = [](const Tensor& t, int64_t d) { return t.dim() == 4 ? t.stride(d) : d == 0 ? 0 : t.stride(d - 1); };
  const int64_t sn = st(input, 0), sc = st(input, 1), sh = st(input, 2), sw = st(input, 3);
  // Columns in the order that copies the longest runs: (i, j, c) for channels-last input, where a
  // window row's kw * C values lie together, else (c, i, j).
  const bool hwc = sc == 1 && p.C > 1;
  MatOperand patches = hwc ? MatOperand{input, {p.N, p.OH, p.OW, p.kh, p.kw, p.C}, {sn, p.kh * sh, p.kw * sw, sh, sw, sc}}
                           : MatOperand{input, {p.N, p.OH, p.OW, p.C, p.kh, p.kw}, {sn, p.kh * sh, p.kw * sw, sc, sh, sw}};
  materialize(patches);
  patches.sizes = {rows, K};
  patches.strides = {K, 1};
  // gout^T as [O, rows]: column-major where grad_out is channels-last (no copy), else copied.
  MatOperand gout{grad_out,
                  {p.N, p.OH, p.OW, p.O},
                  {st(grad_out, 0), st(grad_out, 2), st(grad_out, 3), st(grad_out, 1)}};
  const bool flat = gout.strides[3] == 1 && gout.strides[2] == p.O && gout.strides[1] == p.OW * p.O &&
                    (p.N == 1 || gout.strides[0] == p.OH * p.OW * p.O);
  if (!flat) materialize(gout);
  MatOperand gout_t{gout.t, {p.O, rows}, {1, p.O}};
  Tensor gw = new_tensor(p.weight_sizes(), input.dtype(), input.device());
  if (!hwc) {
    kCpuMatmul.core(std::move(gout_t), std::move(patches), {p.O, K}, gw, Tensor(), false);
    return gw;
  }
  // [O, kh, kw, C] -> [O, C, kh, kw]
  Tensor ohwi = new_tensor({p.O, p.kh, p.kw, p.C}, input.dtype(), input.device());
  kCpuMatmul.core(std::move(gout_t), std::move(patches), {p.O, K}, ohwi, Tensor(), false);
  MatOperand oihw{ohwi, {p.O, p.C, p.kh, p.kw}, {K, 1, p.kw * p.C, p.C}};
  materialize(oihw);
  return oihw.t;
}

// ---- float64: direct loops ----

// Output positions o in [lo, hi) whose input index o*stride + offset lies in [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t in, int64_t stride, int64_t offset) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

// Planes per task so a task does at least ~32K multiply-adds.
int64_t plane_grain(int64_t work_per_plane) { return grain_for(work_per_plane); }

// y[n, o] = bias[o] + sum_{c, ki, kj} w[o, c, ki, kj] * x[n, g*Cg + c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]
template <class T>
void conv_fwd_loops(const ConvParams& p, const T* x, const T* w, const T* bias, T* y) {
  int64_t Cg = p.C / p.groups, Og = p.O / p.groups, plane = p.OH * p.OW;
  parallel_for(0, p.N * p.O, plane_grain(Cg * p.kh * p.kw * plane), [&](int64_t b, int64_t e) {
    for (int64_t no = b; no < e; ++no) {
      int64_t n = no / p.O, o = no % p.O, g = o / Og;
      T* yp = y + no * plane;
      std::fill(yp, yp + plane, bias ? bias[o] : T(0));
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xp = x + (n * p.C + g * Cg + c) * p.H * p.W;
        for (int64_t ki = 0; ki < p.kh; ++ki) {
          int64_t ioff = ki * p.dh - p.ph;
          auto [oh0, oh1] = valid_range(p.OH, p.H, p.sh, ioff);
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            int64_t joff = kj * p.dw - p.pw;
            auto [ow0, ow1] = valid_range(p.OW, p.W, p.sw, joff);
            T wv = w[((o * Cg + c) * p.kh + ki) * p.kw + kj];
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              T* yr = yp + oh * p.OW;
              const T* xr = xp + (oh * p.sh + ioff) * p.W + joff;
              for (int64_t ow = ow0; ow < ow1; ++ow) yr[ow] += wv * xr[ow * p.sw];
            }
          }
        }
      }
    }
  });
}

// gx[n, ci] = sum over the output positions and out channels that read input channel ci.
template <class T>
void conv_bwd_input_loops(const ConvParams& p, const T* gy, const T* w, T* gx) {
  int64_t Cg = p.C / p.groups, Og = p.O / p.groups, plane = p.OH * p.OW;
  parallel_for(0, p.N * p.C, plane_grain(Og * p.kh * p.kw * plane), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      int64_t n = nc / p.C, ci = nc % p.C, g = ci / Cg, c = ci % Cg;
      T* gxp = gx + nc * p.H * p.W;
      std::fill(gxp, gxp + p.H * p.W, T(0));
      for (int64_t o = g * Og; o < (g + 1) * Og; ++o) {
        const T* gyp = gy + (n * p.O + o) * plane;
        for (int64_t ki = 0; ki < p.kh; ++ki) {
          int64_t ioff = ki * p.dh - p.ph;
          auto [oh0, oh1] = valid_range(p.OH, p.H, p.sh, ioff);
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            int64_t joff = kj * p.dw - p.pw;
            auto [ow0, ow1] = valid_range(p.OW, p.W, p.sw, joff);
            T wv = w[((o * Cg + c) * p.kh + ki) * p.kw + kj];
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              const T* gyr = gyp + oh * p.OW;
              T* gxr = gxp + (oh * p.sh + ioff) * p.W + joff;
              for (int64_t ow = ow0; ow < ow1; ++ow) gxr[ow * p.sw] += wv * gyr[ow];
            }
          }
        }
      }
    }
  });
}

// gw[o, c, ki, kj] = sum_{n, oh, ow} gy[n, o, oh, ow] * x[n, g*Cg + c, ih, iw]
template <class T>
void conv_bwd_weight_loops(const ConvParams& p, const T* gy, const T* x, T* gw) {
  int64_t Cg = p.C / p.groups, Og = p.O / p.groups, plane = p.OH * p.OW;
  parallel_for(0, p.O, plane_grain(p.N * Cg * p.kh * p.kw * plane), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t g = o / Og;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t ki = 0; ki < p.kh; ++ki) {
          int64_t ioff = ki * p.dh - p.ph;
          auto [oh0, oh1] = valid_range(p.OH, p.H, p.sh, ioff);
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            int64_t joff = kj * p.dw - p.pw;
            auto [ow0, ow1] = valid_range(p.OW, p.W, p.sw, joff);
            T acc = 0;
            for (int64_t n = 0; n < p.N; ++n) {
              const T* gyp = gy + (n * p.O + o) * plane;
              const T* xp = x + (n * p.C + g * Cg + c) * p.H * p.W;
              for (int64_t oh = oh0; oh < oh1; ++oh) {
                const T* gyr = gyp + oh * p.OW;
                const T* xr = xp + (oh * p.sh + ioff) * p.W + joff;
                for (int64_t ow = ow0; ow < ow1; ++ow) acc += gyr[ow] * xr[ow * p.sw];
              }
            }
            gw[((o * Cg + c) * p.kh + ki) * p.kw + kj] = acc;
          }
        }
    }
  });
}

// ---- kernels ----

// A fresh activation of `sizes`, NHWC when `nhwc`.
Tensor new_activation(const Shape& sizes, bool nhwc, const Tensor& like) {
  return nhwc ? new_channels_last(sizes, like.dtype(), like.device())
              : new_tensor(sizes, like.dtype(), like.device());
}
Tensor dense_activation(const Tensor& t, bool nhwc) {
  return contiguous_in_format(t, nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
}

// The float64 loops compute NCHW; an NHWC result is copied into place.
template <class F>
void run_loops_into(const Tensor& out, bool nhwc, F&& loops) {
  if (!nhwc) return loops(out);
  Tensor tmp = new_tensor(out.sizes(), out.dtype(), out.device());
  loops(tmp);
  device_copy(out, tmp);
}

}  // namespace

WeightCacheStats conv_weight_cache_stats() { return weight_cache().stats(); }
void clear_conv_weight_cache() { weight_cache().clear(); }

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor conv2d_cpu(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
                  const Shape& dilation, int64_t groups) {
  ConvParams p = plan_conv2d(input, weight, bias, stride, padding, dilation, groups);
  bool nhwc = input.dim() == 4 && (is_channels_last(input) || is_channels_last(weight));
  Tensor b = bias.defined() ? contiguous_cpu(bias) : Tensor();
  Tensor out = new_activation(p.output_sizes(), nhwc, input);
  if (p.N == 0) return out;
  if (nhwc && few_channels_conv(p, input.dtype())) {
    few_channels_conv_forward(p, input, weight, b, out);
    return out;
  }
  Tensor w = contiguous_cpu(weight);
  if (input.dtype() != kFloat64) {
    run_conv(kKeyConvFwd, p, dense_activation(input, nhwc), w, out, b, nhwc);
  } else {
    Tensor x = contiguous_cpu(input);
    run_loops_into(out, nhwc, [&](const Tensor& y) {
      conv_fwd_loops<double>(p, x.data_ptr<double>(), w.data_ptr<double>(), b.defined() ? b.data_ptr<double>() : nullptr,
                             y.data_ptr<double>());
    });
  }
  return out;
}

Tensor conv2d_backward_input_cpu(const Tensor& grad_out, const Shape& input_sizes, const Tensor& weight,
                                 const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  ConvParams p = plan_conv2d_backward_input(grad_out, input_sizes, weight, stride, padding, dilation, groups);
  bool nhwc = grad_out.dim() == 4 && (is_channels_last(grad_out) || is_channels_last(weight));
  Tensor gx = new_activation(p.input_sizes(), nhwc, grad_out);
  if (gx.numel() == 0) return gx;
  Tensor w = contiguous_cpu(weight);
  if (grad_out.dtype() != kFloat64) {
    run_conv(kKeyConvBwdData, p, dense_activation(grad_out, nhwc), w, gx, Tensor(), nhwc);
  } else {
    Tensor gy = contiguous_cpu(grad_out);
    run_loops_into(gx, nhwc, [&](const Tensor& g) {
      conv_bwd_input_loops<double>(p, gy.data_ptr<double>(), w.data_ptr<double>(), g.data_ptr<double>());
    });
  }
  return gx;
}

namespace {

// The weight gradient, and where grad_bias is given the bias gradient: from the weight gradient's
// own pass over grad_out where its kernel can (oneDNN's, the few-channels loops), else by a sum.
// The conv's bias gradient as a separate sum re-read the largest gradient of a CNN (its first
// layer's: [64, 32, 28, 28] channels-last, 89 us in bf16, 142 us in float32, on the Xeon).
Tensor weight_grad(const ConvParams& p, const Tensor& grad_out, const Tensor& input, Tensor* grad_bias) {
  auto bias_by_sum = [&] {
    if (grad_bias) *grad_bias = sum_cpu(grad_out, p.batched ? Shape{0, 2, 3} : Shape{1, 2}, false, std::nullopt);
  };
  if (p.N == 0 || p.C == 0) {
    bias_by_sum();
    return fill_cpu(new_tensor(p.weight_sizes(), input.dtype(), input.device()), 0);
  }
  if (patch_weight_grad_pays(p, grad_out)) {
    bias_by_sum();
    return patch_weight_grad(p, grad_out, input);
  }
  if (few_channels_conv(p, input.dtype()) && grad_out.dim() == 4 &&
      is_non_overlapping_and_dense(grad_out.sizes(), grad_out.strides()) && is_channels_last(grad_out))
    return few_channels_conv_weight_grad(p, grad_out, input, grad_bias);
  Tensor gw = new_tensor(p.weight_sizes(), input.dtype(), input.device());
  bool nhwc = input.dim() == 4 && (is_channels_last(grad_out) || is_channels_last(input));
  if (input.dtype() != kFloat64) {
    // oneDNN's float32 kernel (jit:avx512_core) sums the bias of channels-last gradients slower
    // than a separate sum (on the Xeon, the CNN's [64, 32, 28, 28] gradient: 0.38 ms weight and
    // sum, 0.56 ms fused; [64, 64, 14, 14]: 1.39, 1.48); its bf16 and NCHW ones pay.
    const bool fused_bias = grad_bias && p.batched && !(nhwc && input.dtype() == kFloat32);
    Tensor gb = fused_bias ? new_tensor({p.O}, grad_out.dtype(), grad_out.device()) : Tensor();
    run_conv(kKeyConvBwdWeights, p, dense_activation(input, nhwc), dense_activation(grad_out, nhwc), gw, gb, nhwc);
    if (gb.defined()) *grad_bias = gb;
    else bias_by_sum();
  } else {
    Tensor gy = contiguous_cpu(grad_out), x = contiguous_cpu(input);
    conv_bwd_weight_loops<double>(p, gy.data_ptr<double>(), x.data_ptr<double>(), gw.data_ptr<double>());
    bias_by_sum();
  }
  return gw;
}

}  // namespace

Tensor conv2d_backward_weight_cpu(const Tensor& grad_out, const Tensor& input, const Shape& weight_sizes,
                                  const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  ConvParams p = plan_conv2d_backward_weight(grad_out, input, weight_sizes, stride, padding, dilation, groups);
  return weight_grad(p, grad_out, input, nullptr);
}

std::vector<Tensor> conv2d_backward_weight_bias_cpu(const Tensor& grad_out, const Tensor& input,
                                                    const Shape& weight_sizes, const Shape& stride, const Shape& padding,
                                                    const Shape& dilation, int64_t groups) {
  ConvParams p = plan_conv2d_backward_weight(grad_out, input, weight_sizes, stride, padding, dilation, groups);
  Tensor gb;
  Tensor gw = weight_grad(p, grad_out, input, &gb);
  return {gw, gb};
}

}  // namespace kernels

}  // namespace graft
