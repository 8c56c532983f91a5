#include "nn/budget_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/error.h"

namespace graft::nn {

namespace {

int64_t saved_bytes(const LayerProfile& l) {
  return l.own_bytes + (l.saves_input ? l.input_bytes : 0) + (l.saves_output ? l.output_bytes : 0);
}
// A kept layer's backward holds the gradients of its output and of its input.
int64_t grad_bytes(const LayerProfile& l) { return l.input_bytes + l.output_bytes; }

// What a step adds to the held bytes at the end of forward, given whether the boundary before it
// is already held (and updates that flag for the next step): invariant 2 of the header.
int64_t added_bytes(const std::vector<LayerProfile>& L, const PlanStep& s, bool& boundary_held) {
  const LayerProfile& f = L[static_cast<size_t>(s.first)];
  switch (s.kind) {
    case StepKind::Keep: {
      int64_t a = f.own_bytes + (f.saves_input && !boundary_held ? f.input_bytes : 0) +
                  (f.saves_output ? f.output_bytes : 0);
      boundary_held = f.saves_output;
      return a;
    }
    case StepKind::Offload: boundary_held = false; return 0;
    case StepKind::Compress: boundary_held = false; return f.codecs[static_cast<size_t>(s.codec)].held_bytes;
    case StepKind::Segment: {
      int64_t a = boundary_held ? 0 : f.input_bytes;
      boundary_held = false;
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

double forward_seconds(const std::vector<LayerProfile>& L, int first, int last) {
  double t = 0;
  for (int i = first; i <= last; ++i) t += L[static_cast<size_t>(i)].forward_seconds;
  return t;
}

// Invariants 2-5 over a run of steps, with `base` bytes held before it and the run's input boundary
// held or not. peak_bytes is absolute (includes base).
PlanCost eval_range(const std::vector<LayerProfile>& L, const std::vector<PlanStep>& steps, int64_t base,
                    bool input_held) {
  std::vector<int64_t> added(steps.size());
  bool flag = input_held;
  for (size_t k = 0; k < steps.size(); ++k) added[k] = added_bytes(L, steps[k], flag);
  PlanCost c;
  c.peak_bytes = base;
  int64_t prefix = base;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PlanStep& s = steps[k];
    int64_t at = prefix + added[k];
    const LayerProfile& f = L[static_cast<size_t>(s.first)];
    int64_t p = at;
    switch (s.kind) {
      case StepKind::Keep: p = at + grad_bytes(f); break;
      case StepKind::Offload:
        p = at + saved_bytes(f) + grad_bytes(f);
        c.extra_seconds += f.offload_seconds;
        break;
      case StepKind::Compress:
        p = at + saved_bytes(f) + grad_bytes(f);
        c.extra_seconds += f.codecs[static_cast<size_t>(s.codec)].seconds;
        break;
      case StepKind::Segment: {
        PlanCost inner = eval_range(L, s.inner.empty() ? all_kept(s.first, s.last) : s.inner, at, true);
        p = inner.peak_bytes;
        c.extra_seconds += forward_seconds(L, s.first, s.last) + inner.extra_seconds;
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

// The search (invariant 4: sizes in units, rounded up). G(pos, last, r, flag) is the least extra
// time to plan layers [pos, last] when r units remain above what is held and the boundary before
// `pos` is held (flag) or not. Its choices at `pos`:
//   keep pos                  needs its share + gradients <= r, then G(pos+1, last, r - share, ...)
//   offload pos               needs its saved bytes + gradients <= r, then G(pos+1, last, r, false);
//                             only outside segments (a checkpoint re-run saves through its own
//                             hooks), so the memo tells the top level apart when offload is on
//   a segment [pos, c]        holds its input (unless already held); backward re-runs it under the
//                             best plan of [pos, c] with what remains: G(pos, c, r - in, true);
//                             then G(c+1, last, r - in, false). Not the whole remainder when its
//                             input is already held: that re-run would be this same state.
// Memoized over (pos, last, r, flag); a plan's steps come back by replaying the recorded choices.
class Search {
 public:
  Search(const std::vector<LayerProfile>& L, double unit, int max_units)
      : L_(L), n_(static_cast<int>(L.size())), unit_(unit), R_(max_units) {
    for (const auto& l : L) offload_ = offload_ || l.offload_seconds >= 0 || !l.codecs.empty();
    size_t states = static_cast<size_t>(n_) * n_ * (R_ + 1) * (offload_ ? 4 : 2);
    cost_.assign(states, -1.0f);  // -1: not computed yet
    choice_.assign(states, 0);
    for (const auto& l : L) {
      keep_share_[0].push_back(units(l.own_bytes + (l.saves_input ? l.input_bytes : 0) + (l.saves_output ? l.output_bytes : 0)));
      keep_share_[1].push_back(units(l.own_bytes + (l.saves_output ? l.output_bytes : 0)));
      grad_.push_back(units(grad_bytes(l)));
      saved_.push_back(units(saved_bytes(l)));
      input_.push_back(units(l.input_bytes));
      std::vector<int> held;
      for (const auto& c : l.codecs) held.push_back(units(c.held_bytes));
      codec_held_.push_back(std::move(held));
    }
    prefix_t_.assign(static_cast<size_t>(n_) + 1, 0.0);
    for (int i = 0; i < n_; ++i) prefix_t_[i + 1] = prefix_t_[i] + L[static_cast<size_t>(i)].forward_seconds;
  }

  int units(int64_t bytes) const { return static_cast<int>(std::ceil(static_cast<double>(bytes) / unit_)); }

  float solve(int pos, int last, int r, int flag, int top) {
    if (pos > last) return 0.0f;
    if (r < 0) return kInf;
    size_t k = index(pos, last, r, flag, top);
    if (cost_[k] >= 0) return cost_[k];
    float best = kInf;
    int pick = 0;  // 1 keep, 2 offload, 3 + c - pos: segment [pos, c], kCodecPick + k: codec k
    const LayerProfile& f = L_[static_cast<size_t>(pos)];
    bool keep_flag = f.saves_output;
    int share = keep_share_[flag][pos];
    if (share + grad_[pos] <= r) {
      float c = solve(pos + 1, last, r - share, keep_flag, top);
      if (c < best) best = c, pick = 1;
    }
    if (top && f.offload_seconds >= 0 && saved_[pos] + grad_[pos] <= r) {
      float c = static_cast<float>(f.offload_seconds) + solve(pos + 1, last, r, 0, top);
      if (c < best) best = c, pick = 2;
    }
    for (size_t k = 0; top && k < f.codecs.size(); ++k) {
      const int held = codec_held_[pos][k];
      if (held + saved_[pos] + grad_[pos] > r) continue;
      float c = static_cast<float>(f.codecs[k].seconds) + solve(pos + 1, last, r - held, 0, top);
      if (c < best) best = c, pick = kCodecPick + static_cast<int>(k);
    }
    int rs = r - (flag ? 0 : input_[pos]);
    if (rs >= 0) {
      int end = flag ? last - 1 : last;
      for (int c = pos; c <= end; ++c) {
        float t = static_cast<float>(prefix_t_[c + 1] - prefix_t_[pos]);
        if (t >= best) break;  // recompute time only grows with c
        float inner = solve(pos, c, rs, 1, 0);
        if (t + inner >= best) continue;
        float rest = solve(c + 1, last, rs, 0, top);
        if (t + inner + rest < best) best = t + inner + rest, pick = 3 + (c - pos);
      }
    }
    cost_[k] = best;
    choice_[k] = pick;
    return best;
  }

  // Replays the recorded choices into plan steps.
  void steps(int pos, int last, int r, int flag, int top, std::vector<PlanStep>& out) {
    while (pos <= last) {
      size_t k = index(pos, last, r, flag, top);
      int pick = choice_[k];
      const LayerProfile& f = L_[static_cast<size_t>(pos)];
      if (pick == 1) {
        out.push_back({StepKind::Keep, pos, pos, {}});
        r -= keep_share_[flag][pos];
        flag = f.saves_output;
        ++pos;
      } else if (pick == 2) {
        out.push_back({StepKind::Offload, pos, pos, {}});
        flag = 0;
        ++pos;
      } else if (pick >= kCodecPick) {
        const int k = pick - kCodecPick;
        out.push_back({StepKind::Compress, pos, pos, {}, k});
        r -= codec_held_[pos][static_cast<size_t>(k)];
        flag = 0;
        ++pos;
      } else {
        int c = pos + pick - 3;
        int rs = r - (flag ? 0 : input_[pos]);
        PlanStep seg{StepKind::Segment, pos, c, {}};
        steps(pos, c, rs, 1, 0, seg.inner);
        // An inner plan that keeps every layer is the plain re-run: stored as empty.
        bool plain = std::all_of(seg.inner.begin(), seg.inner.end(), [](const PlanStep& s) { return s.kind == StepKind::Keep; });
        if (plain) seg.inner.clear();
        out.push_back(std::move(seg));
        r = rs;
        flag = 0;
        pos = c + 1;
      }
    }
  }

 private:
  size_t index(int pos, int last, int r, int flag, int top) const {
    size_t k = ((static_cast<size_t>(pos) * n_ + last) * (R_ + 1) + r) * 2 + flag;
    return offload_ ? k * 2 + top : k;
  }
  const std::vector<LayerProfile>& L_;
  int n_;
  double unit_;
  int R_;
  bool offload_ = false;
  std::vector<float> cost_;
  std::vector<uint16_t> choice_;
  std::vector<int> keep_share_[2], grad_, saved_, input_;
  std::vector<std::vector<int>> codec_held_;
  // Picks from here on name a codec; below it, 3 + (c - pos) names a segment, and c - pos < n.
  static constexpr int kCodecPick = 60000;
  std::vector<double> prefix_t_;
};

}  // namespace

PlanCost evaluate_plan(const std::vector<LayerProfile>& layers, const std::vector<PlanStep>& steps) {
  return eval_range(layers, steps, 0, /*input_held=*/true);
}

std::vector<PlanStep> sequential_plan(int num_layers, int segments) {
  GRAFT_CHECK(segments >= 1, "sequential_plan: segments must be at least 1, got ", segments);
  if (num_layers == 0) return {};
  return sequential_steps(0, num_layers - 1, segments);
}

SolvedPlan solve_plan(const std::vector<LayerProfile>& L, int64_t budget_bytes, int units) {
  GRAFT_CHECK(units >= 1 && units <= 65535, "solve_plan: units must be in [1, 65535], got ", units);
  const int n = static_cast<int>(L.size());
  SolvedPlan none;
  none.cost.peak_bytes = -1;
  if (n == 0) return SolvedPlan{};
  if (budget_bytes <= 0) return none;
  // Keeping everything costs nothing: when it fits exactly, no rounded search can do better.
  SolvedPlan plain{all_kept(0, n - 1), {}};
  plain.cost = evaluate_plan(L, plain.steps);
  if (plain.cost.peak_bytes <= budget_bytes) return plain;
  // Sizes round up to units of budget/units bytes (invariant 4), so the search never overcommits.
  double unit = static_cast<double>(budget_bytes) / units;
  int r = units;
  Search search(L, unit, r);
  if (search.solve(0, n - 1, r, 1, 1) == kInf) return none;
  SolvedPlan out;
  search.steps(0, n - 1, r, 1, 1, out.steps);
  out.cost = evaluate_plan(L, out.steps);
  return out;
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
