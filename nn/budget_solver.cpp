#include "nn/budget_solver.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "runtime/error.h"

namespace graft::nn {

namespace {

int64_t saved_bytes(const LayerProfile& l) {
  return l.own_bytes + (l.saves_input ? l.input_bytes : 0) + (l.saves_output ? l.output_bytes : 0);
}
// A kept layer's backward holds the gradients of its output and of its input.
// A kept layer's backward: measured, or the gradients of its output and of its input (invariant 3).
int64_t grad_bytes(const LayerProfile& l) {
  return l.backward_bytes >= 0 ? l.backward_bytes : l.input_bytes + l.output_bytes;
}
// A compressed layer's backward on top of its share (invariant 7).
int64_t codec_backward_bytes(const LayerProfile& l, int codec) {
  const LayerProfile::Codec& c = l.codecs[static_cast<size_t>(codec)];
  return c.backward_bytes >= 0 ? c.backward_bytes : saved_bytes(l) + grad_bytes(l);
}

// The state of the boundary before a step (invariant 7): not held, held in full, or held packed by
// codec c (kPackedBy + c).
constexpr int kNotHeld = 0, kHeld = 1, kPackedBy = 2;

// Where a run of steps runs (the search's modes): a segment's plain re-run, the plan's own steps, or
// a segment's re-run under codec c (kRerunBy + c), whose hooks pack everything it saves.
constexpr int kPlainRerun = 0, kTop = 1, kRerunBy = 2;

// A compressed layer's share at the end of forward, and the boundary state after it.
int64_t compress_share(const LayerProfile& f, int codec, int& boundary) {
  const LayerProfile::Codec& c = f.codecs[static_cast<size_t>(codec)];
  int64_t a = c.held_bytes - (boundary == kPackedBy + codec ? c.input_bytes : 0);
  boundary = c.shares_output ? kPackedBy + codec : kNotHeld;
  return a;
}

// Invariant 13: what a sliced step's layers hold from forward to backward (defined below).
int64_t sliced_held(const std::vector<LayerProfile>& L, const PlanStep& s);

// What a step adds to the held bytes at the end of forward, given the state of the boundary before
// it (and updates that state for the next step): invariants 2 and 7 of the header.
int64_t added_bytes(const std::vector<LayerProfile>& L, const PlanStep& s, int& boundary) {
  const LayerProfile& f = L[static_cast<size_t>(s.first)];
  switch (s.kind) {
    case StepKind::Keep: {
      int64_t a = f.own_bytes + (f.saves_input && boundary != kHeld ? f.input_bytes : 0) +
                  (f.saves_output ? f.output_bytes : 0);
      boundary = f.saves_output ? kHeld : kNotHeld;
      return a;
    }
    case StepKind::Offload: boundary = kNotHeld; return 0;
    case StepKind::Compress: return compress_share(f, s.codec, boundary);
    case StepKind::Segment:
    case StepKind::Chunked: {
      int64_t a = boundary == kHeld ? 0 : f.input_bytes;
      boundary = kNotHeld;
      return a;
    }
    case StepKind::Sliced: {
      int64_t a = (boundary == kHeld ? 0 : f.input_bytes) + sliced_held(L, s);
      boundary = kNotHeld;
      return a;
    }
  }
  return 0;
}

std::vector<PlanStep> all_kept(int first, int last) {
  std::vector<PlanStep> s;
  for (int i = first; i <= last; ++i) s.push_back({StepKind::Keep, i, i, {}});
  return s;
}

// Invariants 12 and 13: what running a stretch's forward by k slices of the batch costs beyond
// running it whole, as a fraction of its forward: a tenth per slice after the first.
double slice_stretch(int k) { return (k - 1) / 10.0; }
// A chunked step's time in forwards of its stretch: the re-run, plus slicing in forward and re-run.
double chunked_forwards(int k) { return 1 + 2 * slice_stretch(k); }

double forward_seconds(const std::vector<LayerProfile>& L, int first, int last) {
  double t = 0;
  for (int i = first; i <= last; ++i) t += L[static_cast<size_t>(i)].forward_seconds;
  return t;
}

int64_t forward_bytes(const std::vector<LayerProfile>& L, const PlanStep& s, int flag, bool top);

// Whether a kept or compressed layer writes its output over its input (invariant 11).
bool over_input(const LayerProfile& f, int flag, bool top) { return top && f.in_place && flag != kHeld; }

// Invariant 12: a layer's figures for one of k slices of its batch. Activations and their
// gradients divide; its parameters' gradients, part of its measured backward, do not, and are made
// afresh even where the step's own gradients are preallocated.
LayerProfile slice_of(const LayerProfile& l, int k) {
  auto part = [k](int64_t b) { return (b + k - 1) / k; };
  LayerProfile s;
  s.own_bytes = part(l.own_bytes);
  s.input_bytes = part(l.input_bytes);
  s.output_bytes = part(l.output_bytes);
  s.saves_input = l.saves_input;
  s.saves_output = l.saves_output;
  s.param_grad_bytes = l.param_bytes;  // a slice's gradients are fresh tensors, summed by the step
  auto backward = [&](int64_t b) { return b < 0 ? b : part(std::max<int64_t>(0, b - l.param_bytes)) + l.param_bytes; };
  s.backward_bytes = backward(l.backward_bytes);
  for (const LayerProfile::Codec& c : l.codecs) {  // invariant 13: a slice under a codec
    LayerProfile::Codec sc = c;
    sc.held_bytes = part(c.held_bytes);
    sc.input_bytes = c.input_bytes / k;  // rounded down, as the search rounds a layer's share up
    sc.backward_bytes = backward(c.backward_bytes);
    s.codecs.push_back(sc);
  }
  return s;
}

// Invariant 12 for the chunked steps [first, c] with k slices, for each c from `first` on while
// the layers split into k slices: forward[c - first] is its forward point less its input, and
// backward[c - first] its backward point above what is held. The slice's re-run is eval_range's
// all-kept arithmetic (input held, not top level), carried along c: adding a layer adds its points
// and its parameters' gradients to every earlier backward point (invariant 10).
struct ChunkedFigures {
  std::vector<int64_t> forward, backward;
};
ChunkedFigures chunked_figures(const std::vector<LayerProfile>& L, int first, int k) {
  ChunkedFigures out;
  const int n = static_cast<int>(L.size());
  std::vector<int64_t> grads_from(static_cast<size_t>(n) + 1, 0);  // parameter gradients of layers >= j
  for (int j = n - 1; j >= 0; --j) grads_from[j] = grads_from[j + 1] + L[static_cast<size_t>(j)].param_grad_bytes;
  const int64_t input_grad = first == 0 && !L[0].input_needs_grad ? 0 : L[static_cast<size_t>(first)].input_bytes;
  int flag = kHeld;
  int64_t prefix = 0, max_forward = 0, inside = 0;
  int64_t slice_grads = 0;  // the slice's parameter gradients of layers first..c
  int64_t summed = 0;       // their running sums
  int64_t max_backward = std::numeric_limits<int64_t>::min();  // of (backward point - slice_grads so far)
  for (int c = first; c < n; ++c) {
    const LayerProfile& f = L[static_cast<size_t>(c)];
    if (f.rows < k) break;
    const std::vector<LayerProfile> one{slice_of(f, k)};
    const LayerProfile& s = one[0];
    const PlanStep keep{StepKind::Keep, 0, 0, {}};
    max_forward = std::max(max_forward, prefix + forward_bytes(one, keep, flag, /*top=*/false));
    const int64_t at = prefix + added_bytes(one, keep, flag);
    slice_grads += s.param_grad_bytes;
    // The slice's output (layer c's) is the inner backward's root, held through all of it: at
    // layer c's own point on top of its saves unless it saves the output itself, and at every
    // earlier layer's point on top of that point (where a plain backward has freed c's saves).
    // The root's gradient is a view of the whole output's (counted above the re-run), where a
    // measured backward allocated it: layer c's own point leaves it out.
    const int64_t root_backward = std::max<int64_t>(0, grad_bytes(s) - s.output_bytes);
    const int64_t own = at + root_backward - slice_grads + (s.saves_output ? 0 : s.output_bytes);
    const int64_t earlier = c > first ? max_backward + s.output_bytes : own;
    const int64_t rerun = std::max(max_forward, slice_grads + std::max(own, earlier));
    max_backward = std::max(max_backward, at + grad_bytes(s) - slice_grads);
    prefix = at;
    inside = std::max(inside, (c > first ? s.input_bytes : 0) + s.own_bytes + s.output_bytes);
    out.forward.push_back(f.output_bytes + inside);
    summed += f.param_bytes;
    out.backward.push_back(grads_from[c + 1] + f.output_bytes + input_grad + summed + rerun);
  }
  return out;
}

// Invariant 13 for the sliced steps [first, c] with k slices under `codec` (-1: none), for each c
// from `first` on while the layers split into k slices (and have the codec): held[c - first] is
// what they hold from forward to backward (the whole batch's, as a re-run under the codec would
// hold it: the step's input not included), forward[] its forward point and backward[] its backward
// point above what is held, both less the input; seconds[] its extra time.
struct SlicedFigures {
  std::vector<int64_t> held, forward, backward;
  std::vector<double> seconds;
};
SlicedFigures sliced_figures(const std::vector<LayerProfile>& L, int first, int k, int codec) {
  SlicedFigures out;
  const int n = static_cast<int>(L.size());
  std::vector<int64_t> grads_from(static_cast<size_t>(n) + 1, 0);
  for (int j = n - 1; j >= 0; --j) grads_from[j] = grads_from[j + 1] + L[static_cast<size_t>(j)].param_grad_bytes;
  const int64_t input_grad = first == 0 && !L[0].input_needs_grad ? 0 : L[static_cast<size_t>(first)].input_bytes;
  const int64_t one_input_grad = slice_of(L[static_cast<size_t>(first)], k).input_bytes;  // a slice's share
  int flag = kHeld, slice_flag = kHeld;
  int64_t held = 0, slice_held = 0, slice_grads = 0, summed = 0;
  // Over the layers j so far, of (one slice's saves through j + j's backward - its gradients through j).
  int64_t max_backward = std::numeric_limits<int64_t>::min();
  // The last slice's forward at layer j: the other slices' saves (all of the stretch's), its own
  // saves of the layers before j, and layer j's input (unless one of those saves), intermediates,
  // output and packed save, all of one slice.
  int64_t at_layer = 0;  // max over j of (held before j + j's forward point), whole-batch bytes
  double seconds = 0;
  for (int c = first; c < n; ++c) {
    const LayerProfile& f = L[static_cast<size_t>(c)];
    if (f.rows < k || (codec >= 0 && static_cast<int>(f.codecs.size()) <= codec)) break;
    const PlanStep own = codec >= 0 ? PlanStep{StepKind::Compress, c, c, {}, codec} : PlanStep{StepKind::Keep, c, c, {}};
    const int64_t packed = codec >= 0 ? f.codecs[static_cast<size_t>(codec)].held_bytes : 0;
    const int64_t input = c > first && flag != kHeld ? f.input_bytes : 0;  // not when the layer before saved it
    at_layer = std::max(at_layer, held + input + f.own_bytes + f.output_bytes + packed);
    held += added_bytes(L, own, flag);
    const std::vector<LayerProfile> one{slice_of(f, k)};
    const LayerProfile& s = one[0];
    PlanStep slice_own = own;
    slice_own.first = slice_own.last = 0;
    slice_held += added_bytes(one, slice_own, slice_flag);
    slice_grads += s.param_grad_bytes;
    // A slice's backward at layer j holds its saves through j (the later layers' are freed), the
    // later layers' fresh gradients, and j's backward. The slice's output has no data to hold (a
    // stand-in root) and its gradient is a view of the whole output's, counted below: layer c's
    // own point as the last leaves out the output gradient its measured backward allocated.
    const int64_t backward = codec >= 0 ? codec_backward_bytes(s, codec) : grad_bytes(s);
    const int64_t as_last = slice_held + std::max<int64_t>(0, backward - s.output_bytes) - slice_grads;
    const int64_t slice_point = std::max(max_backward, as_last) - slice_held + slice_grads;
    max_backward = std::max(max_backward, slice_held + backward - slice_grads);
    summed += f.param_bytes;
    seconds += codec >= 0 ? f.codecs[static_cast<size_t>(codec)].seconds : 0.0;
    out.held.push_back(held);
    out.forward.push_back(f.output_bytes + held - held / k + (at_layer + k - 1) / k);
    // The first slice's backward runs before the summed gradients and the input's exist (the first
    // slice's gradients become the sums), which are made once it has returned, while its input's
    // gradient is still held; each later slice runs with them, and with the slices before it freed.
    const int64_t after_first = input_grad > 0 ? slice_grads + one_input_grad + input_grad - slice_held : 0;
    out.backward.push_back(grads_from[c + 1] + f.output_bytes +
                           std::max({slice_point, after_first, slice_point + input_grad + summed - slice_held}));
    out.seconds.push_back(seconds + forward_seconds(L, first, c) * slice_stretch(k));
  }
  return out;
}

// A sliced step's figures (invariant 13), checked against its layers.
SlicedFigures checked_sliced(const std::vector<LayerProfile>& L, const PlanStep& s) {
  GRAFT_CHECK(s.chunks >= 1, "evaluate_plan: a sliced step over layers ", s.first, "-", s.last,
              " needs at least 1 slice, got ", s.chunks);
  SlicedFigures f = sliced_figures(L, s.first, s.chunks, s.codec);
  GRAFT_CHECK(static_cast<int>(f.held.size()) > s.last - s.first, "evaluate_plan: layers ", s.first, "-", s.last,
              " cannot run by ", s.chunks, " slices of the batch", s.codec >= 0 ? " under codec " : "",
              s.codec >= 0 ? std::to_string(s.codec) : std::string(),
              ": a layer does not split by rows, has fewer rows, or lacks the codec");
  return f;
}

int64_t sliced_held(const std::vector<LayerProfile>& L, const PlanStep& s) {
  return checked_sliced(L, s).held[static_cast<size_t>(s.last - s.first)];
}

// A chunked step's figures (invariant 12), checked against its layers.
ChunkedFigures checked_chunked(const std::vector<LayerProfile>& L, const PlanStep& s) {
  GRAFT_CHECK(s.chunks >= 1, "evaluate_plan: a chunked step over layers ", s.first, "-", s.last,
              " needs at least 1 slice, got ", s.chunks);
  ChunkedFigures c = chunked_figures(L, s.first, s.chunks);
  GRAFT_CHECK(static_cast<int>(c.forward.size()) > s.last - s.first, "evaluate_plan: layers ", s.first, "-", s.last,
              " cannot run by ", s.chunks, " slices of the batch: a layer does not split by rows or has fewer rows");
  return c;
}

// Invariant 9: what a step holds at its largest point in forward, above what the steps before it
// hold, with the boundary before it in state `flag`; `top`: a step of the plan itself, not of a
// segment's re-run.
int64_t forward_bytes(const std::vector<LayerProfile>& L, const PlanStep& s, int flag, bool top) {
  const LayerProfile& f = L[static_cast<size_t>(s.first)];
  const int64_t in = flag == kHeld ? 0 : f.input_bytes;
  const int64_t out = over_input(f, flag, top) ? 0 : f.output_bytes;
  switch (s.kind) {
    case StepKind::Keep: return in + f.own_bytes + out;
    case StepKind::Offload: return in + f.own_bytes + f.output_bytes;
    case StepKind::Compress: return in + f.own_bytes + out + f.codecs[static_cast<size_t>(s.codec)].held_bytes;
    case StepKind::Segment: {
      int64_t inside = 0;
      for (int j = s.first; j <= s.last; ++j) {
        const LayerProfile& l = L[static_cast<size_t>(j)];
        inside = std::max(inside, (j > s.first ? l.input_bytes : 0) + l.own_bytes + l.output_bytes);
      }
      return in + inside;
    }
    case StepKind::Chunked: return in + checked_chunked(L, s).forward[static_cast<size_t>(s.last - s.first)];
    case StepKind::Sliced: return in + checked_sliced(L, s).forward[static_cast<size_t>(s.last - s.first)];
  }
  return 0;
}

// Invariant 10: the parameter gradients held while layer `first` runs backward (every later layer's).
int64_t grads_after(const std::vector<LayerProfile>& L, int layer) {
  int64_t g = 0;
  for (size_t j = static_cast<size_t>(layer) + 1; j < L.size(); ++j) g += L[j].param_grad_bytes;
  return g;
}

// Invariants 2-5 over a run of steps, with `base` bytes held before it and the run's input boundary
// held or not; `top`: the plan's own steps (invariant 11). peak_bytes is absolute (includes base).
PlanCost eval_range(const std::vector<LayerProfile>& L, const std::vector<PlanStep>& steps, int64_t base,
                    bool input_held, int64_t forward_extra, bool top) {
  std::vector<int64_t> added(steps.size());
  std::vector<int> before(steps.size());
  int flag = input_held ? kHeld : kNotHeld;
  for (size_t k = 0; k < steps.size(); ++k) {
    before[k] = flag;
    added[k] = added_bytes(L, steps[k], flag);
  }
  PlanCost c;
  c.peak_bytes = base;
  int64_t prefix = base;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PlanStep& s = steps[k];
    // Forward (invariant 9), then the step's backward.
    c.peak_bytes = std::max(c.peak_bytes, prefix + forward_extra + forward_bytes(L, s, before[k], top));
    int64_t at = prefix + added[k];
    const LayerProfile& f = L[static_cast<size_t>(s.first)];
    const int64_t g = grads_after(L, s.last);  // invariant 10
    int64_t p = at;
    switch (s.kind) {
      case StepKind::Keep: p = at + g + grad_bytes(f); break;
      case StepKind::Offload:
        p = at + g + saved_bytes(f) + grad_bytes(f);
        c.extra_seconds += f.offload_seconds;
        break;
      case StepKind::Compress:
        p = at + g + codec_backward_bytes(f, s.codec);
        c.extra_seconds += f.codecs[static_cast<size_t>(s.codec)].seconds;
        break;
      case StepKind::Segment: {
        rerun_codec(s);  // one pair of hooks for the whole re-run, or none
        // The re-run's forward happens with the gradient of the segment's output waiting.
        PlanCost inner = eval_range(L, s.inner.empty() ? all_kept(s.first, s.last) : s.inner, at, true,
                                    L[static_cast<size_t>(s.last)].output_bytes + g, /*top=*/false);
        p = inner.peak_bytes;
        c.extra_seconds += forward_seconds(L, s.first, s.last) + inner.extra_seconds;
        break;
      }
      case StepKind::Chunked:
        p = at + checked_chunked(L, s).backward[static_cast<size_t>(s.last - s.first)];
        c.extra_seconds += forward_seconds(L, s.first, s.last) * chunked_forwards(s.chunks);
        break;
      case StepKind::Sliced: {
        const SlicedFigures f = checked_sliced(L, s);
        p = at + f.backward[static_cast<size_t>(s.last - s.first)];
        c.extra_seconds += f.seconds[static_cast<size_t>(s.last - s.first)];
        break;
      }
    }
    c.peak_bytes = std::max(c.peak_bytes, p);
    prefix = at;
  }
  c.held_bytes = prefix - base;
  return c;
}

// checkpoint_sequential's shape over [first, last]: `segments` chunks, all but the last checkpointed.
std::vector<PlanStep> sequential_steps(int first, int last, int segments) {
  int n = last - first + 1;
  int seg = std::max(1, (n + segments - 1) / segments);
  std::vector<PlanStep> steps;
  int lo = first;
  for (; lo + seg <= last; lo += seg) steps.push_back({StepKind::Segment, lo, lo + seg - 1, {}});
  for (int i = lo; i <= last; ++i) steps.push_back({StepKind::Keep, i, i, {}});
  return steps;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// The search (invariant 4: sizes in units, rounded up). G(pos, last, r, flag, mode) is the least
// extra time to plan layers [pos, last] when r units remain above what is held and the boundary
// before `pos` is in state `flag` (not held, held in full, or packed by codec c: invariant 7), where
// `mode` says where the steps run: at the top level, in a plain re-run, or in a re-run under codec
// c's hooks. Its choices at `pos`:
//   keep pos                  needs its share + gradients <= r, then G(pos+1, last, r - share, ...);
//                             not under a codec's re-run, which packs every save
//   offload pos               needs its saved bytes + gradients <= r, then G(pos+1, last, r, false);
//                             top level only
//   compress pos with codec k needs its share + saved bytes + gradients <= r, then
//                             G(pos+1, last, r - share, packed by k or not held); at the top level
//                             any codec, under codec c's re-run only c (and always), in a plain
//                             re-run none
//   a segment [pos, c]        holds its input (unless already held); backward re-runs it, plain or
//                             under a codec, with the best plan of [pos, c] for that mode with what
//                             remains: G(pos, c, r - in, true, re-run mode); then G(c+1, last,
//                             r - in, false, mode). Not the whole remainder when its input is
//                             already held: that re-run would be this same state.
//   a chunked step [pos, c]   by k slices (invariant 12), top level only: holds its input as a
//                             segment; needs its forward and backward points <= r - in, then
//                             G(c+1, last, r - in, false).
// Memoized over (pos, last, r, flag, mode); a plan's steps come back by replaying the recorded
// choices.
class Search {
 public:
  Search(const std::vector<LayerProfile>& L, double unit, int max_units)
      : L_(L), n_(static_cast<int>(L.size())), unit_(unit), R_(max_units) {
    size_t ncodecs = 0;
    for (const auto& l : L) {
      // Decisions open only at the top level: the memo then tells the top level apart.
      offload_ = offload_ || l.offload_seconds >= 0 || !l.codecs.empty() || l.rows >= kChunkCounts[0];
      ncodecs = std::max(ncodecs, l.codecs.size());
    }
    flags_ = kPackedBy + static_cast<int>(ncodecs);
    ncodecs_ = static_cast<int>(ncodecs);
    // Modes: a plain re-run, the top level, a re-run under each codec (invariant 7). The top level
    // and a re-run differ even without top-only decisions (the chain's output, invariant 8; a layer
    // written over its input, invariant 11), and a segment may end at the last layer, so the two
    // never share a memo entry.
    modes_ = kRerunBy + (offload_ ? ncodecs_ : 0);
    size_t states = static_cast<size_t>(n_) * n_ * (R_ + 1) * flags_ * modes_;
    cost_.assign(states, -1.0f);  // -1: not computed yet
    choice_.assign(states, 0);
    for (const auto& l : L) {
      keep_share_[0].push_back(units(l.own_bytes + (l.saves_input ? l.input_bytes : 0) + (l.saves_output ? l.output_bytes : 0)));
      keep_share_[1].push_back(units(l.own_bytes + (l.saves_output ? l.output_bytes : 0)));
      grad_.push_back(units(grad_bytes(l) + grads_after(L, static_cast<int>(&l - L.data()))));
      saved_.push_back(units(saved_bytes(l)));
      input_.push_back(units(l.input_bytes));
      std::vector<int> held, in, bwd;
      for (size_t k = 0; k < l.codecs.size(); ++k) {
        const auto& c = l.codecs[k];
        bwd.push_back(units(codec_backward_bytes(l, static_cast<int>(k)) + grads_after(L, static_cast<int>(&l - L.data()))));
        held.push_back(units(c.held_bytes));
        // Rounded down, so that held - input still rounds the layer's share up.
        in.push_back(static_cast<int>(std::floor(static_cast<double>(c.input_bytes) / unit_)));
      }
      codec_held_.push_back(std::move(held));
      codec_input_.push_back(std::move(in));
      codec_bwd_.push_back(std::move(bwd));
    }
    for (const auto& l : L) {
      fwd_[0].push_back(units(l.input_bytes + l.own_bytes + l.output_bytes));
      fwd_[1].push_back(units(l.own_bytes + l.output_bytes));
      fwd_over_input_.push_back(units(l.input_bytes + l.own_bytes));
      output_units_.push_back(units(l.output_bytes + grads_after(L, static_cast<int>(&l - L.data()))));
    }
    out_units_ = units(L.back().output_bytes);
    chunk_fwd_.resize(static_cast<size_t>(n_));
    chunk_bwd_.resize(static_cast<size_t>(n_));
    for (int pos = 0; pos < n_; ++pos)
      for (int k : kChunkCounts) {
        // No slices where the first layer has too few rows (or none): skip its figures' work.
        ChunkedFigures c = L[static_cast<size_t>(pos)].rows >= k ? chunked_figures(L, pos, k) : ChunkedFigures{};
        std::vector<int> f, b;
        for (size_t d = 0; d < c.forward.size(); ++d) f.push_back(units(c.forward[d])), b.push_back(units(c.backward[d]));
        chunk_fwd_[static_cast<size_t>(pos)].push_back(std::move(f));
        chunk_bwd_[static_cast<size_t>(pos)].push_back(std::move(b));
      }
    // Invariant 13: per first layer, slice count and codec (none first), per last layer.
    slices_.resize(static_cast<size_t>(n_));
    for (int pos = 0; pos < n_; ++pos)
      for (int k : kChunkCounts)
        for (int v = 0; v <= ncodecs_; ++v) {
          Sliced u;
          if (L[static_cast<size_t>(pos)].rows >= k) {
            const SlicedFigures f = sliced_figures(L, pos, k, v - 1);
            for (size_t d = 0; d < f.held.size(); ++d) {
              u.held.push_back(units(f.held[d]));
              u.forward.push_back(units(f.forward[d]));
              u.backward.push_back(units(f.backward[d]));
              u.seconds.push_back(static_cast<float>(f.seconds[d]));
            }
          }
          slices_[static_cast<size_t>(pos)].push_back(std::move(u));
        }
    // Invariant 8: a kept last layer at the top level saves the caller's own output.
    const LayerProfile& e = L.back();
    last_keep_share_[0] = units(e.own_bytes + (e.saves_input ? e.input_bytes : 0));
    last_keep_share_[1] = units(e.own_bytes);
    prefix_t_.assign(static_cast<size_t>(n_) + 1, 0.0);
    for (int i = 0; i < n_; ++i) prefix_t_[i + 1] = prefix_t_[i] + L[static_cast<size_t>(i)].forward_seconds;
  }

  int units(int64_t bytes) const { return static_cast<int>(std::ceil(static_cast<double>(bytes) / unit_)); }

  // `mode`: kTop, kPlainRerun, or kRerunBy + c for a segment's re-run under codec c.
  float solve(int pos, int last, int r, int flag, int mode) {
    if (pos > last) return 0.0f;
    if (r < 0) return kInf;
    size_t k = index(pos, last, r, flag, mode);
    const bool top = mode == kTop;
    const int rerun = mode >= kRerunBy ? mode - kRerunBy : -1;  // the re-run's codec
    if (cost_[k] >= 0) return cost_[k];
    float best = kInf;
    int pick = 0;  // 1 keep, 2 offload, 3 + c - pos: segment [pos, c], kCodecPick + k: codec k
    const LayerProfile& f = L_[static_cast<size_t>(pos)];
    int keep_flag = f.saves_output ? kHeld : kNotHeld;
    int share = keep_share(pos, flag, top);
    // Invariant 9: forward's points. At the top level no output exists yet (it came off r); in a
    // re-run the gradient of the segment's output waits.
    const int fx = top ? -out_units_ : output_units_[static_cast<size_t>(last)];
    const int fwd = fwd_[flag == kHeld][static_cast<size_t>(pos)] + fx;
    // Kept or compressed, it may write over its input (invariant 11); offloaded, it does not.
    const int fwd_kept = over_input(f, flag, top) ? fwd_over_input_[static_cast<size_t>(pos)] + fx : fwd;
    // Under a codec's re-run every layer it runs directly is compressed: no keeping there.
    if (rerun < 0 && share + grad_[pos] <= r && fwd_kept <= r) {
      float c = solve(pos + 1, last, r - share, keep_flag, mode);
      if (c < best) best = c, pick = 1;
    }
    if (top && f.offload_seconds >= 0 && saved_[pos] + grad_[pos] <= r && fwd <= r) {
      float c = static_cast<float>(f.offload_seconds) + solve(pos + 1, last, r, 0, mode);
      if (c < best) best = c, pick = 2;
    }
    for (size_t k = 0; (top || rerun >= 0) && k < f.codecs.size(); ++k) {
      if (rerun >= 0 && static_cast<int>(k) != rerun) continue;
      const int held = codec_share(pos, static_cast<int>(k), flag);
      if (held + codec_bwd_[pos][k] > r || fwd_kept + codec_held_[pos][k] > r) continue;
      const int next = f.codecs[k].shares_output ? kPackedBy + static_cast<int>(k) : kNotHeld;
      float c = static_cast<float>(f.codecs[k].seconds) + solve(pos + 1, last, r - held, next, mode);
      if (c < best) best = c, pick = kCodecPick + static_cast<int>(k);
    }
    int rs = r - (flag == kHeld ? 0 : input_[pos]);
    if (rs >= 0) {
      int end = flag == kHeld ? last - 1 : last;
      int inside = 0;  // the segment's forward: its largest layer's input, intermediates and output
      for (int c = pos; c <= end; ++c) {
        inside = std::max(inside, c == pos ? fwd_[1][static_cast<size_t>(c)] : fwd_[0][static_cast<size_t>(c)]);
        if (inside + fx > rs) break;  // only grows with c
        float t = static_cast<float>(prefix_t_[c + 1] - prefix_t_[pos]);
        if (t >= best) break;  // recompute time only grows with c
        // The re-run plain (j = 0) or under codec j - 1.
        for (int j = 0; j <= (offload_ ? ncodecs_ : 0); ++j) {
          float inner = solve(pos, c, rs, kHeld, j == 0 ? kPlainRerun : kRerunBy + j - 1);
          if (t + inner >= best) continue;
          float rest = solve(c + 1, last, rs, kNotHeld, mode);
          if (t + inner + rest < best) best = t + inner + rest, pick = kSegmentPick + (c - pos) * (ncodecs_ + 1) + j;
        }
      }
      // Sliced steps [pos, c] (invariant 13): no re-run, their saves held (packed by codec v - 1).
      for (size_t u = 0; top && u < slices_[static_cast<size_t>(pos)].size(); ++u) {
        const Sliced& sl = slices_[static_cast<size_t>(pos)][u];
        for (size_t d = 0; d < sl.held.size(); ++d) {
          const float t = sl.seconds[d];
          if (t >= best) break;  // grows with c
          if (sl.forward[d] + fx > rs || sl.held[d] + sl.backward[d] > rs) continue;
          float rest = solve(pos + static_cast<int>(d) + 1, last, rs - sl.held[d], kNotHeld, mode);
          if (t + rest < best) best = t + rest, pick = kSlicePick + static_cast<int>(d * slices_[0].size() + u);
        }
      }
      for (size_t ki = 0; top && ki < chunk_fwd_[static_cast<size_t>(pos)].size(); ++ki) {
        const std::vector<int>& cf = chunk_fwd_[static_cast<size_t>(pos)][ki];
        const std::vector<int>& cb = chunk_bwd_[static_cast<size_t>(pos)][ki];
        for (int c = pos; c <= last && static_cast<size_t>(c - pos) < cf.size(); ++c) {
          float t = static_cast<float>((prefix_t_[c + 1] - prefix_t_[pos]) * chunked_forwards(kChunkCounts[ki]));
          if (t >= best) break;  // recompute time only grows with c
          const size_t d = static_cast<size_t>(c - pos);
          if (cf[d] + fx > rs || cb[d] > rs) continue;
          float rest = solve(c + 1, last, rs, kNotHeld, mode);
          if (t + rest < best) best = t + rest, pick = kChunkPick + static_cast<int>(d) * kChunkKinds + static_cast<int>(ki);
        }
      }
    }
    cost_[k] = best;
    choice_[k] = pick;
    return best;
  }

  // Replays the recorded choices into plan steps.
  void steps(int pos, int last, int r, int flag, int mode, std::vector<PlanStep>& out) {
    const bool top = mode == kTop;
    while (pos <= last) {
      size_t k = index(pos, last, r, flag, mode);
      int pick = choice_[k];
      const LayerProfile& f = L_[static_cast<size_t>(pos)];
      if (pick == 1) {
        out.push_back({StepKind::Keep, pos, pos, {}});
        r -= keep_share(pos, flag, top);
        flag = f.saves_output ? kHeld : kNotHeld;
        ++pos;
      } else if (pick == 2) {
        out.push_back({StepKind::Offload, pos, pos, {}});
        flag = kNotHeld;
        ++pos;
      } else if (pick >= kSlicePick && pick < kChunkPick) {
        const size_t variants = slices_[0].size();
        const size_t d = static_cast<size_t>(pick - kSlicePick) / variants, u = static_cast<size_t>(pick - kSlicePick) % variants;
        const int per_k = ncodecs_ + 1;
        PlanStep st{StepKind::Sliced, pos, pos + static_cast<int>(d), {}};
        st.chunks = kChunkCounts[u / static_cast<size_t>(per_k)];
        st.codec = static_cast<int>(u % static_cast<size_t>(per_k)) - 1;
        out.push_back(std::move(st));
        r -= (flag == kHeld ? 0 : input_[pos]) + slices_[static_cast<size_t>(pos)][u].held[d];
        flag = kNotHeld;
        pos += static_cast<int>(d) + 1;
      } else if (pick >= kChunkPick && pick < kCodecPick) {
        const int d = (pick - kChunkPick) / kChunkKinds, ki = (pick - kChunkPick) % kChunkKinds;
        PlanStep st{StepKind::Chunked, pos, pos + d, {}};
        st.chunks = kChunkCounts[ki];
        out.push_back(std::move(st));
        r -= flag == kHeld ? 0 : input_[pos];
        flag = kNotHeld;
        pos += d + 1;
      } else if (pick >= kCodecPick) {
        const int k = pick - kCodecPick;
        out.push_back({StepKind::Compress, pos, pos, {}, k});
        r -= codec_share(pos, k, flag);
        flag = f.codecs[static_cast<size_t>(k)].shares_output ? kPackedBy + k : kNotHeld;
        ++pos;
      } else {
        const int d = (pick - kSegmentPick) / (ncodecs_ + 1), j = (pick - kSegmentPick) % (ncodecs_ + 1);
        int c = pos + d;
        int rs = r - (flag == kHeld ? 0 : input_[pos]);
        PlanStep seg{StepKind::Segment, pos, c, {}};
        steps(pos, c, rs, kHeld, j == 0 ? kPlainRerun : kRerunBy + j - 1, seg.inner);
        // An inner plan that keeps every layer is the plain re-run: stored as empty.
        bool plain = std::all_of(seg.inner.begin(), seg.inner.end(), [](const PlanStep& s) { return s.kind == StepKind::Keep; });
        if (plain) seg.inner.clear();
        out.push_back(std::move(seg));
        r = rs;
        flag = kNotHeld;
        pos = c + 1;
      }
    }
  }

 private:
  int keep_share(int pos, int flag, int top) const {
    if (top && pos == n_ - 1) return last_keep_share_[flag == kHeld];
    return keep_share_[flag == kHeld][static_cast<size_t>(pos)];
  }
  // Invariant 7: a boundary its codec already packed is not counted again.
  int codec_share(int pos, int k, int flag) const {
    const int held = codec_held_[static_cast<size_t>(pos)][static_cast<size_t>(k)];
    return flag == kPackedBy + k ? held - codec_input_[static_cast<size_t>(pos)][static_cast<size_t>(k)] : held;
  }
  size_t index(int pos, int last, int r, int flag, int mode) const {
    size_t k = ((static_cast<size_t>(pos) * n_ + last) * (R_ + 1) + r) * flags_ + flag;
    return k * static_cast<size_t>(modes_) + static_cast<size_t>(mode);
  }
  const std::vector<LayerProfile>& L_;
  int n_;
  double unit_;
  int R_;
  bool offload_ = false;
  int flags_ = kPackedBy;  // boundary states: not held, held, packed by each codec
  int ncodecs_ = 0;
  int modes_ = kRerunBy;   // kPlainRerun, kTop, and a re-run under each codec
  std::vector<float> cost_;
  std::vector<uint16_t> choice_;
  std::vector<int> keep_share_[2], grad_, saved_, input_;
  std::vector<int> fwd_[2], output_units_;  // invariant 9: a layer's forward (input not held / held)
  std::vector<int> fwd_over_input_;         // invariant 11: its forward, written over its input
  int out_units_ = 0;                        // the chain's output (invariant 8)
  int last_keep_share_[2] = {0, 0};
  std::vector<std::vector<int>> codec_held_, codec_input_, codec_bwd_;
  // Picks from kCodecPick on name a codec; from kChunkPick, kChunkPick + (c - pos) * kChunkKinds
  // + the index into kChunkCounts names a chunked step; below it, kSegmentPick + (c - pos) *
  // (codecs + 1) + j names a segment re-run plain (j = 0) or under codec j - 1.
  static constexpr int kSegmentPick = 3;
  // From kSlicePick: kSlicePick + (c - pos) * variants + u names a sliced step, u indexing slices_.
  static constexpr int kSlicePick = 10000;
  static constexpr int kCodecPick = 60000;
  static constexpr int kChunkPick = 40000;
  static constexpr int kChunkKinds = static_cast<int>(std::size(kChunkCounts));
  // Invariant 12 in units, per first layer and slice count, per last layer from the first on.
  std::vector<std::vector<std::vector<int>>> chunk_fwd_, chunk_bwd_;
  // Invariant 13 in units, per first layer and (slice count, codec or none), per last layer.
  struct Sliced {
    std::vector<int> held, forward, backward;
    std::vector<float> seconds;
  };
  std::vector<std::vector<Sliced>> slices_;
  std::vector<double> prefix_t_;
};

}  // namespace

int rerun_codec(const PlanStep& segment) {
  int codec = -1;
  bool kept = false;
  for (const PlanStep& s : segment.inner) {
    if (s.kind == StepKind::Keep) kept = true;
    if (s.kind == StepKind::Offload || s.kind == StepKind::Chunked || s.kind == StepKind::Sliced)
      GRAFT_ERROR("evaluate_plan: the re-run of segment ", segment.first, "-", segment.last, " holds a ",
                  s.kind == StepKind::Offload ? "offloaded" : "sliced", " step (layer ", s.first,
                  "); offload and slices of the batch happen only at the plan's top level");
    if (s.kind != StepKind::Compress) continue;
    GRAFT_CHECK(codec < 0 || codec == s.codec, "evaluate_plan: the re-run of segment ", segment.first, "-",
                segment.last, " compresses with two codecs (", codec, " and ", s.codec,
                "); a re-run saves through one codec's hooks");
    codec = s.codec;
  }
  GRAFT_CHECK(codec < 0 || !kept, "evaluate_plan: the re-run of segment ", segment.first, "-", segment.last,
              " both keeps and compresses layers; under a codec's hooks every layer it runs directly is compressed");
  return codec;
}

PlanCost evaluate_plan(const std::vector<LayerProfile>& layers, const std::vector<PlanStep>& steps) {
  if (layers.empty()) return {};
  // Invariant 8: the caller's output is held throughout; a kept last layer saves that same tensor.
  const int64_t out = layers.back().output_bytes;
  const int last = static_cast<int>(layers.size()) - 1;
  PlanCost c;
  if (!steps.empty() && steps.back().kind == StepKind::Keep && steps.back().first == last &&
      layers.back().saves_output) {
    std::vector<LayerProfile> l2 = layers;
    l2.back().saves_output = false;
    c = eval_range(l2, steps, out, /*input_held=*/true, -out, /*top=*/true);
  } else {
    c = eval_range(layers, steps, out, /*input_held=*/true, -out, /*top=*/true);  // no output yet in forward
  }
  c.held_bytes += out;
  return c;
}

std::vector<PlanStep> sequential_plan(int num_layers, int segments) {
  GRAFT_CHECK(segments >= 1, "sequential_plan: segments must be at least 1, got ", segments);
  if (num_layers == 0) return {};
  return sequential_steps(0, num_layers - 1, segments);
}

SolvedPlan solve_plan(const std::vector<LayerProfile>& L, int64_t budget_bytes, int units) {
  GRAFT_CHECK(units >= 1 && units <= 65535, "solve_plan: units must be in [1, 65535], got ", units);
  const int n = static_cast<int>(L.size());
  // The search's picks (uint16) name a segment's length and re-run below 10000, a sliced step's
  // length and kind below 40000, and a chunked step's below 60000 (Search::kSlicePick, kChunkPick).
  size_t ncodecs = 0;
  for (const auto& l : L) ncodecs = std::max(ncodecs, l.codecs.size());
  GRAFT_CHECK(n < 2000 && ncodecs <= 2, "solve_plan: at most 1999 layers and 2 codecs, got ", n, " layers and ",
              ncodecs, " codecs");
  SolvedPlan none;
  none.cost.peak_bytes = -1;
  if (n == 0) return SolvedPlan{};
  if (budget_bytes <= 0) return none;
  // Keeping everything costs nothing: when it fits exactly, no rounded search can do better.
  SolvedPlan plain{all_kept(0, n - 1), {}};
  plain.cost = evaluate_plan(L, plain.steps);
  if (plain.cost.peak_bytes <= budget_bytes) return plain;
  // Sizes round up to units of budget/units bytes (invariant 4), so the search never overcommits.
  // Invariant 9: the search sees backward's points only; a plan whose forward breaks the budget is
  // searched for again under the budget less the excess, a few times at most.
  int64_t searched = budget_bytes;
  for (int attempt = 0; attempt < 6 && searched > 0; ++attempt) {
    double unit = static_cast<double>(searched) / units;
    // Invariant 8: the caller's output comes off the top.
    int r = units - static_cast<int>(std::ceil(static_cast<double>(L.back().output_bytes) / unit));
    if (r < 0) return none;
    Search search(L, unit, units);
    if (search.solve(0, n - 1, r, kHeld, kTop) == kInf) return none;
    SolvedPlan out;
    search.steps(0, n - 1, r, kHeld, kTop, out.steps);
    out.cost = evaluate_plan(L, out.steps);
    if (out.cost.peak_bytes <= budget_bytes) return out;
    searched -= out.cost.peak_bytes - budget_bytes + static_cast<int64_t>(std::ceil(unit));
  }
  return none;
}

int64_t min_peak_bytes(const std::vector<LayerProfile>& L) {
  if (L.empty()) return 0;
  // The all-kept plan fits its own peak; search down from there for the smallest budget (within
  // 0.1%) for which solve_plan finds a plan. That budget, not the plan's exact peak, is what a user
  // can pass back: rounding is relative to the budget.
  int64_t hi = evaluate_plan(L, all_kept(0, static_cast<int>(L.size()) - 1)).peak_bytes;
  int64_t lo = 0;
  while (hi - lo > std::max<int64_t>(1, hi / 1024)) {
    int64_t mid = lo + (hi - lo) / 2;
    if (solve_plan(L, mid).cost.peak_bytes >= 0) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace graft::nn
