#include "autograd/checkpoint_rows.h"

#include <algorithm>
#include <any>
#include <memory>
#include <mutex>

#include "autograd/autocast.h"
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor_hooks.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/memory_format.h"
#include "runtime/shape.h"

namespace graft::autograd {

namespace {

constexpr const char* kState = "checkpoint_rows";

struct RowsState {
  std::function<Tensor(const Tensor&)> fn;
  std::vector<Tensor> params;
  int64_t per = 1;  // rows per slice (the last may have fewer)
  autocast::AutocastState autocast;
  // Invariant 6: per slice, its input (a leaf when the input needs a gradient) and its output's
  // graph, reached through an alias of the output's rows; empty when fn is re-run.
  bool recompute = true;
  std::vector<Tensor> slice_inputs, slice_roots;
  std::mutex mu;  // slice_* are dropped by the backward that frees them
};

// A fresh tensor of `sizes` laid out as `like` (channels-last stays channels-last), so that
// writing slices of `like`'s layout into it copies densely.
Tensor empty_in_layout(const Shape& sizes, const Tensor& like) {
  if (sizes.size() == 4 && like.dim() == 4 && like.suggest_memory_format() == MemoryFormat::ChannelsLast)
    return ops::empty_strided(sizes, channels_last_strides(sizes), like.dtype(), like.device());
  return ops::empty(sizes, like.dtype(), like.device());
}

Shape with_rows(Shape s, int64_t rows) {
  s[0] = rows;
  return s;
}

// fn on one slice, checked against invariant 1.
Tensor run_slice(const RowsState& st, const Tensor& x, int64_t len) {
  Tensor y = st.fn(x);
  GRAFT_CHECK(y.defined() && y.dim() >= 1 && y.size(0) == len,
              "checkpoint_rows: fn must keep the batch dimension: a slice of ", len, " rows, shape ",
              shape_str(x.sizes()), ", gave ", y.defined() ? shape_str(y.sizes()) : std::string("an undefined tensor"));
  return y;
}

// Every slice's output has the first's trailing shape and dtype.
void check_like_first(const Tensor& out, const Tensor& y) {
  GRAFT_CHECK(std::equal(y.sizes().begin() + 1, y.sizes().end(), out.sizes().begin() + 1, out.sizes().end()) &&
                  y.dtype() == out.dtype(),
              "checkpoint_rows: fn gave slices of different shapes or dtypes: ", shape_str(out.sizes()), " so far, then ",
              shape_str(y.sizes()));
}

variable_list rows_backward(FunctionCtx* ctx, variable_list grads) {
  RowsState& st = *std::any_cast<const std::shared_ptr<RowsState>&>(ctx->saved_data.at(kState));
  const std::vector<Tensor> saved = ctx->saved_tensors();
  std::vector<Tensor> slice_inputs, slice_roots;
  if (!st.recompute) {
    std::lock_guard<std::mutex> lock(st.mu);
    GRAFT_CHECK(!st.slice_roots.empty(), "checkpoint_rows: the slices' graphs were already freed by an earlier "
                "backward. Specify retain_graph=true if you need to backward through the graph a second time.");
    slice_inputs = st.slice_inputs;
    slice_roots = st.slice_roots;
  }
  const Tensor input = st.recompute ? saved[0] : Tensor();
  const Tensor& g = grads[0];
  const int64_t rows = st.recompute ? input.size(0) : g.size(0);
  const bool want_x = ctx->needs_input_grad(0);
  std::vector<size_t> want_p;
  for (size_t i = 0; i < st.params.size(); ++i)
    if (ctx->needs_input_grad(1 + i)) want_p.push_back(i);
  variable_list out(1 + st.params.size());
  AutogradTls fresh;  // no enclosing hooks, grad mode on (invariant 3)
  fresh.grad_enabled = true;
  AutogradTlsGuard tls(fresh);
  autocast::AutocastStateGuard autocast_state(st.autocast);
  const bool keep = keeps_graph(current_graph_task());
  if (!st.recompute && !keep) {
    std::lock_guard<std::mutex> lock(st.mu);
    st.slice_roots.clear();
    st.slice_inputs.clear();
  }
  for (int64_t lo = 0, s = 0; lo < rows; lo += st.per, ++s) {
    const int64_t len = std::min(st.per, rows - lo);
    Tensor x = st.recompute ? input.narrow(0, lo, len).detach() : slice_inputs[static_cast<size_t>(s)];
    if (want_x && st.recompute) x.requires_grad_(true);
    std::vector<Tensor> wrt;
    if (want_x) wrt.push_back(x);
    for (size_t i : want_p) wrt.push_back(st.params[i]);
    std::vector<Tensor> r;
    {
      Tensor y = st.recompute ? run_slice(st, x, len) : slice_roots[static_cast<size_t>(s)];
      // The parameters' tensor hooks run once, on the summed gradient the node hands on (invariant 4).
      CaptureBeforeHooksGuard raw;
      if (y.defined() && y.requires_grad())
        r = grad({y}, wrt, {g.narrow(0, lo, len)}, /*retain_graph=*/!st.recompute && keep, /*create_graph=*/false,
                 /*allow_unused=*/true);
    }
    if (!st.recompute && !keep) {
      // This slice's graph is spent: drop it now, so that backward holds one slice's (invariant 6).
      slice_roots[static_cast<size_t>(s)] = Tensor();
      slice_inputs[static_cast<size_t>(s)] = Tensor();
    }
    r.resize(wrt.size());
    size_t k = 0;
    if (want_x) {
      if (!out[0].defined()) out[0] = empty_in_layout(with_rows(x.sizes(), rows), x);
      Tensor dst = out[0].narrow(0, lo, len);
      if (r[0].defined()) dst.copy_(r[0]);
      else dst.zero_();
      k = 1;
    }
    for (size_t i : want_p) {
      Tensor& acc = out[1 + i];
      const Tensor& gi = r[k++];
      if (!gi.defined()) continue;
      // The first slice's gradient becomes the sum, written in place by the next ones: a dense
      // copy where the engine handed over a broadcast view.
      if (!acc.defined()) acc = gi.is_contiguous() ? gi : gi.contiguous();
      else acc.add_(gi);
    }
  }
  return out;
}

}  // namespace

Tensor checkpoint_rows(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                       const std::vector<Tensor>& params, int64_t chunks, RowsOptions options) {
  GRAFT_CHECK(static_cast<bool>(fn), "checkpoint_rows: fn is empty");
  GRAFT_CHECK(input.defined() && input.dim() >= 1 && input.size(0) >= 1,
              "checkpoint_rows: the input must have a batch dimension with at least one row, got ",
              input.defined() ? shape_str(input.sizes()) : std::string("an undefined tensor"));
  GRAFT_CHECK(chunks >= 1, "checkpoint_rows: chunks must be at least 1, got ", chunks);
  const int64_t rows = input.size(0);
  auto st = std::make_shared<RowsState>();
  st->fn = fn;
  st->params = params;
  st->per = (rows + std::min(chunks, rows) - 1) / std::min(chunks, rows);
  st->autocast = autocast::current_state();
  st->recompute = options.recompute;

  variable_list inputs{input};
  inputs.insert(inputs.end(), params.begin(), params.end());
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && tensor_requires_grad(t));
  std::shared_ptr<CustomNode> node;
  if (is_recording_enabled() && any) {
    node = std::make_shared<CustomNode>("CheckpointRowsBackward", &rows_backward);
    node->arg_is_tensor.assign(inputs.size(), true);
    node->once_differentiable = true;  // invariant 5
    for (const Tensor& t : inputs) {
      node->mutable_next_edges().push_back(t.defined() ? gradient_edge(t) : Edge{});
      node->ctx.needs_input_grad_.push_back(node->mutable_next_edges().back().is_valid());
    }
    node->ctx.node_ = node;
  }

  Tensor out;
  if (node && !st->recompute) {
    // Invariant 6: each slice's graph is kept; only its output's data goes.
    const bool want_x = node->ctx.needs_input_grad_[0];
    EnableGradGuard eg;
    for (int64_t lo = 0; lo < rows; lo += st->per) {
      const int64_t len = std::min(st->per, rows - lo);
      Tensor x = input.narrow(0, lo, len).detach();
      if (want_x) x.requires_grad_(true);
      Tensor y = run_slice(*st, x, len);
      if (!out.defined()) {
        out = empty_in_layout(with_rows(y.sizes(), rows), y);
      } else {
        check_like_first(out, y);
      }
      Tensor rows_of = out.narrow(0, lo, len);
      {
        NoGradGuard ng;
        rows_of.copy_(y);
      }
      Tensor root;
      if (const AutogradMeta* m = get_meta(y); m != nullptr && m->grad_fn_) {
        // A stand-in for y with y's geometry and graph but no data to hold (stride 0 over one
        // element): the engine reads a root's metadata only, and holding the output's rows would
        // keep the whole output alive until backward.
        const Tensor one = ops::empty({1}, y.dtype(), y.device());
        root = Tensor(std::make_shared<TensorImpl>(one.impl()->storage(), y.dtype(), y.sizes(),
                                                   Shape(static_cast<size_t>(y.dim()), 0), 0));
        AutogradMeta& rm = ensure_meta(root);
        rm.grad_fn_ = m->grad_fn_;
        rm.output_nr_ = m->output_nr_;
      } else if (y.requires_grad()) {
        root = y;  // a leaf (fn returned its input): its own gradient, no graph to keep
      }
      st->slice_inputs.push_back(want_x ? x : Tensor());
      st->slice_roots.push_back(root);
    }
    node->ctx.saved_data[kState] = std::any(std::shared_ptr<RowsState>(st));
    return wrap_custom_outputs(node, inputs, {out})[0];
  }
  {
    NoGradGuard ng;
    for (int64_t lo = 0; lo < rows; lo += st->per) {
      const int64_t len = std::min(st->per, rows - lo);
      Tensor y = run_slice(*st, input.narrow(0, lo, len), len);
      if (!out.defined()) {
        // One slice: its output is the output, unless fn returned a view of the input (a flatten),
        // which the node's output must not be.
        if (len == rows && y.impl()->storage() != input.impl()->storage()) {
          out = y;
          break;
        }
        out = empty_in_layout(with_rows(y.sizes(), rows), y);
      } else {
        check_like_first(out, y);
      }
      out.narrow(0, lo, len).copy_(y);
    }
  }
  if (!node) return out;
  node->ctx.save_for_backward({input});
  node->ctx.saved_data[kState] = std::any(std::shared_ptr<RowsState>(st));
  return wrap_custom_outputs(node, inputs, {out})[0];
}

}  // namespace graft::autograd
