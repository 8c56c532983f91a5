#include "autograd/engine.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "autograd/accumulate_grad.h"
#include "autograd/anomaly_mode.h"
#include "autograd/autocast.h"
#include "autograd/autograd_meta.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor_hooks.h"
#include "autograd/unpack_prefetch.h"
#include "ops/ops.h"

namespace graft::autograd {

struct ExecInfo {
  bool needed = false;
  std::vector<std::pair<uint32_t, size_t>> captures;  // (input_nr, index into captured)
};

struct GraphTask {
  int64_t id = 0;
  bool keep_graph = false;
  bool create_graph = false;
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, variable_list> buffers;
  std::unordered_map<Node*, ExecInfo> exec_info;  // empty: run every reachable node
  std::unordered_set<Node*> also_needed;           // see mark_node_needed
  std::vector<Node*> roots;
  variable_list captured;
  std::map<const void*, std::unique_ptr<GraphTaskState>> slots;  // per-task state of graph features, freed with the task
  AutogradTls tls = capture_autograd_tls();
  // Prefetch state, made on the first lookahead (a backward with prefetch off allocates nothing).
  std::shared_ptr<PrefetchGroup> prefetches;  // what the task waits for at its end
  std::unordered_set<Node*> prefetched;       // nodes whose saved tensors were started
  std::vector<std::function<void()>> final_callbacks;  // queue_callback, run after the last node
  bool captures_before_hooks = false;  // CaptureBeforeHooksGuard
};

namespace {

std::atomic<int64_t> g_next_task_id{0};
thread_local GraphTask* t_current_task = nullptr;
thread_local bool t_captures_before_hooks = false;  // CaptureBeforeHooksGuard

struct ReadyEntry {
  std::shared_ptr<Node> node;
  bool operator<(const ReadyEntry& o) const { return node->sequence_nr() < o.node->sequence_nr(); }
};

void compute_dependencies(GraphTask& task, const std::vector<Edge>& roots) {
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const Edge& e : roots)
    if (e.is_valid() && !seen[e.function.get()]) {
      seen[e.function.get()] = true;
      stack.push_back(e.function.get());
    }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      Node* c = e.function.get();
      task.dependencies[c] += 1;
      if (!seen[c]) {
        seen[c] = true;
        stack.push_back(c);
      }
    }
  }
}

// Marks every node from which a requested output can be reached (iterative post-order DFS).
void compute_exec_info(GraphTask& task, const std::vector<Edge>& roots, const std::vector<Edge>& outputs,
                       bool accumulate_grad) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& e = outputs[i];
    if (!e.is_valid()) continue;
    ExecInfo& info = task.exec_info[e.function.get()];
    bool is_leaf_sink = e.function->accumulated_leaf() != nullptr;
    if (accumulate_grad && is_leaf_sink) info.needed = true;
    else info.captures.emplace_back(e.input_nr, i);
  }
  struct Frame {
    Node* node;
    size_t next;
  };
  std::unordered_map<Node*, int> state;  // 0 unvisited, 1 on stack, 2 done
  for (const Edge& r : roots) {
    if (!r.is_valid() || state[r.function.get()] == 2) continue;
    std::vector<Frame> st{{r.function.get(), 0}};
    state[r.function.get()] = 1;
    while (!st.empty()) {
      Frame& f = st.back();
      if (f.next < f.node->next_edges().size()) {
        const Edge& e = f.node->next_edges()[f.next++];
        if (e.is_valid() && state[e.function.get()] == 0) {
          state[e.function.get()] = 1;
          st.push_back({e.function.get(), 0});
        }
        continue;
      }
      Node* n = f.node;
      st.pop_back();
      state[n] = 2;
      bool needed = false;
      for (const Edge& e : n->next_edges()) {
        if (!e.is_valid()) continue;
        auto it = task.exec_info.find(e.function.get());
        if (it != task.exec_info.end() && (it->second.needed || !it->second.captures.empty())) needed = true;
      }
      if (needed) task.exec_info[n].needed = true;
    }
  }
}

bool should_run(const GraphTask& task, Node* n) {
  if (task.exec_info.empty()) return true;
  auto it = task.exec_info.find(n);
  return it != task.exec_info.end() && it->second.needed;
}

// Checks a gradient against the metadata of the forward output it belongs to: broadcast shapes are
// summed back, dtypes cast, anything else is an error naming the node.
Tensor validate_grad(const Node& producer, size_t index, Tensor grad, const TensorMeta& meta) {
  if (grad.sizes() != meta.shape) {
    Shape b;
    bool ok = true;
    try {
      b = broadcast_shapes(meta.shape, grad.sizes(), "backward");
    } catch (const Error&) {
      ok = false;
    }
    GRAFT_CHECK(ok && b == grad.sizes(), "Function ", producer.name(), " returned an invalid gradient at index ",
                index, " - got ", shape_str(grad.sizes()), " but expected shape compatible with ",
                shape_str(meta.shape));
    grad = graft::sum_to(grad, meta.shape);
  }
  GRAFT_CHECK(grad.device() == meta.device, "Function ", producer.name(), " returned an invalid gradient at index ",
              index, " - expected device ", meta.device, " but got ", grad.device());
  if (grad.dtype() != meta.dtype) grad = grad.to(meta.dtype);
  return grad;
}

void add_to_buffer(variable_list& buf, size_t pos, Tensor grad) {
  if (!buf[pos].defined()) {
    buf[pos] = std::move(grad);
  } else if (!is_recording_enabled() && buf[pos].impl_ptr().use_count() == 1 && get_meta(buf[pos]) == nullptr &&
             buf[pos].sizes() == grad.sizes() && buf[pos].is_contiguous()) {
    ops::add_(buf[pos], grad);  // the buffer owns this tensor: accumulate without a new allocation
  } else {
    buf[pos] = graft::add(buf[pos], grad);
  }
}

// Runs one node: tensor hooks, captures, node pre-hooks, apply, release, post hooks. Returns
// false when the node only had captures (its gradients go nowhere else).
bool run_node(GraphTask& task, Node& node, variable_list& inputs, const ExecInfo* info, bool run, variable_list& outs) {
  if (task.captures_before_hooks && !run && info) {
    for (auto [input_nr, idx] : info->captures) task.captured[idx] = inputs[input_nr];
    return false;
  }
  node.run_tensor_pre_hooks(inputs);
  if (info)
    for (auto [input_nr, idx] : info->captures) task.captured[idx] = inputs[input_nr];
  if (!run) return false;
  if (node.has_node_pre_hooks()) node.run_pre_hooks(inputs);

  bool any_defined = false;
  for (const auto& g : inputs) any_defined = any_defined || g.defined();
  if (any_defined) {
    // Multi-output nodes see zeros for outputs that received no gradient.
    if (inputs.size() > 1 && node.materialize_grads())
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].defined() && is_floating(node.input_metadata(i).dtype)) {
          const auto& m = node.input_metadata(i);
          inputs[i] = ops::zeros(m.shape, m.dtype, m.device);
        }
    // Post hooks need the incoming grads afterwards; otherwise hand them over so a sink can steal
    // the buffer instead of copying it.
    outs = node.has_post_hooks() ? node.apply(variable_list(inputs)) : node.apply(std::move(inputs));
  } else {
    outs.resize(node.num_outputs());
  }
  if (!task.keep_graph) node.release_variables();
  if (node.has_post_hooks()) node.run_post_hooks(outs, inputs);
  return true;
}

// Anomaly mode: NaN in a node's output is an error naming the node and the output.
void check_nan_outputs(const Node& node, const variable_list& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& g = outs[i];
    if (!g.defined() || !is_floating(g.dtype()) || g.numel() == 0) continue;
    GRAFT_CHECK(ops::sum(ops::ne(g, g)).item<int64_t>() == 0, "Function '", node.name(), "' returned nan values in its ",
                i, "th output.");
  }
}

// Anomaly mode: the error keeps its message and gains the node and its forward call's stack.
[[noreturn]] void throw_with_forward_trace(const Node& node, const std::exception& e) {
  std::string msg = e.what();
  std::string marker = "\n\nError detected in " + node.name() + ".";
  if (msg.find(marker) != std::string::npos) throw Error(msg);  // an inner backward annotated it already
  msg += marker;
  if (node.forward_trace()) msg += " Traceback of forward call that caused the error:\n" + format_forward_trace(*node.forward_trace());
  else msg += " No forward trace was recorded (the node was created outside anomaly mode).";
  throw Error(msg);
}

// Whether `n`'s rule will compute every gradient it can (each valid edge leads somewhere the task
// goes): only then does it read every tensor it saved. A rule asked for part of its gradients
// (grad() on a subgraph) may skip some, and a prefetch would call a hook no unpack asks for.
bool computes_every_output(const GraphTask& task, Node* n) {
  if (task.exec_info.empty()) return true;
  for (const Edge& e : n->next_edges()) {
    if (!e.is_valid()) continue;
    Node* c = e.function.get();
    auto it = task.exec_info.find(c);
    bool goes = (it != task.exec_info.end() && (it->second.needed || !it->second.captures.empty())) ||
                task.also_needed.count(c) > 0;
    if (!goes) return false;
  }
  return true;
}

// Prefetch (unpack_prefetch.h): starts the saved tensors of the next `k` nodes the engine will run
// after `running`. The order is predicted by replaying the engine's own rule on a copy of the
// frontier: the ready queue, plus children whose last dependency is about to be satisfied, highest
// sequence number first. Nodes outside the task's requested paths are skipped.
void prefetch_ahead(GraphTask& task, const std::vector<ReadyEntry>& ready, Node& running, int k) {
  std::vector<Node*> frontier;
  for (const ReadyEntry& e : ready) frontier.push_back(e.node.get());
  std::unordered_map<Node*, int> pending;  // dependencies left in the replay
  auto release_children = [&](Node* n) {
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      Node* c = e.function.get();
      auto it = pending.find(c);
      if (it == pending.end()) {
        auto dep = task.dependencies.find(c);
        if (dep == task.dependencies.end()) continue;
        it = pending.emplace(c, dep->second).first;
      }
      if (--it->second == 0) frontier.push_back(c);
    }
  };
  release_children(&running);
  auto later = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::make_heap(frontier.begin(), frontier.end(), later);
  for (int seen = 0; seen < k && !frontier.empty();) {
    std::pop_heap(frontier.begin(), frontier.end(), later);
    Node* n = frontier.back();
    frontier.pop_back();
    if (!should_run(task, n)) continue;
    ++seen;
    if (task.prefetched.insert(n).second && computes_every_output(task, n)) {
      if (!task.prefetches) task.prefetches = std::make_shared<PrefetchGroup>();
      for (const SavedVariable* sv : n->saved_variables()) sv->start_prefetch(task.prefetches);
    }
    size_t before = frontier.size();
    release_children(n);
    for (size_t i = before; i < frontier.size(); ++i) std::push_heap(frontier.begin(), frontier.begin() + i + 1, later);
  }
}

// Waits for the task's prefetches, also on an exception (invariant 4 of unpack_prefetch.h).
struct PrefetchDrain {
  GraphTask& task;
  ~PrefetchDrain() {
    if (task.prefetches) task.prefetches->wait();
  }
};

struct TaskScope {
  GraphTask* prev;
  explicit TaskScope(GraphTask* t) : prev(t_current_task) { t_current_task = t; }
  ~TaskScope() { t_current_task = prev; }
};

}  // namespace

variable_list run_backward(const std::vector<Edge>& roots, variable_list root_grads, bool keep_graph,
                           bool create_graph, const std::vector<Edge>& outputs, bool accumulate_grad) {
  GraphTask task;
  task.id = g_next_task_id.fetch_add(1, std::memory_order_relaxed);
  // The guard is for this task only: tasks nested inside it run hooks as usual.
  task.captures_before_hooks = std::exchange(t_captures_before_hooks, false);
  struct RestoreFlag {
    bool v;
    ~RestoreFlag() { t_captures_before_hooks = v; }
  } restore_flag{task.captures_before_hooks};
  task.keep_graph = keep_graph;
  task.create_graph = create_graph;
  task.captured.resize(outputs.size());
  compute_dependencies(task, roots);
  if (!outputs.empty()) compute_exec_info(task, roots, outputs, accumulate_grad);

  TaskScope scope(&task);
  // The task runs under the autograd state of the thread that started it (hooks, disabled hooks),
  // with grad mode set by create_graph.
  AutogradTlsGuard tls(task.tls);
  GradModeGuard mode(create_graph);
  // Backward runs with autocast off (autograd/autocast.h, invariant 4): each rule computes in the
  // dtypes its forward saved, and a create_graph backward records no casts of its own.
  autocast::AutocastState no_autocast = autocast::current_state();
  no_autocast.enabled.fill(false);
  autocast::AutocastStateGuard autocast_off(no_autocast);

  const bool anomaly = is_anomaly_enabled();
  std::vector<ReadyEntry> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge& r = roots[i];
    if (!r.is_valid()) continue;
    task.roots.push_back(r.function.get());
    auto& buf = task.buffers[r.function.get()];
    if (buf.empty()) buf.resize(r.function->num_inputs());
    add_to_buffer(buf, r.input_nr, validate_grad(*r.function, i, root_grads[i], r.function->input_metadata(r.input_nr)));
  }
  for (const Edge& r : roots) {
    if (!r.is_valid() || task.dependencies.count(r.function.get())) continue;
    bool dup = false;
    for (auto& e : ready) dup = dup || e.node == r.function;
    if (!dup) ready.push_back({r.function});
  }
  std::make_heap(ready.begin(), ready.end());

  const int lookahead = create_graph ? 0 : unpack_prefetch();
  PrefetchDrain drain{task};
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end());
    std::shared_ptr<Node> node = std::move(ready.back().node);
    ready.pop_back();
    if (lookahead > 0) prefetch_ahead(task, ready, *node, lookahead);
    variable_list inputs = std::move(task.buffers[node.get()]);
    task.buffers.erase(node.get());
    inputs.resize(node->num_inputs());

    // Tensor hooks fire only for nodes this task executes or captures from, as in PyTorch: a
    // node outside the requested inputs' paths is skipped without running its hooks.
    const ExecInfo* info = nullptr;
    if (!task.exec_info.empty()) {
      auto it = task.exec_info.find(node.get());
      if (it != task.exec_info.end()) info = &it->second;
    }
    bool run = task.exec_info.empty() || should_run(task, node.get());
    if (!run && !(info && !info->captures.empty())) continue;
    variable_list outs;
    bool ran;
    if (!anomaly) {
      ran = run_node(task, *node, inputs, info, run, outs);
    } else {
      try {
        ran = run_node(task, *node, inputs, info, run, outs);
        if (ran && is_anomaly_check_nan_enabled()) check_nan_outputs(*node, outs);
      } catch (const std::exception& e) {
        throw_with_forward_trace(*node, e);
      }
    }
    if (!ran) continue;

    const auto& edges = node->next_edges();
    GRAFT_CHECK(outs.size() == edges.size() || outs.empty(), "Function ", node->name(), " returned ", outs.size(),
                " gradients, expected ", edges.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* child = e.function.get();
      auto& buf = task.buffers[child];
      if (buf.empty()) buf.resize(child->num_inputs());
      if (outs[i].defined()) add_to_buffer(buf, e.input_nr, validate_grad(*node, i, outs[i], child->input_metadata(e.input_nr)));
      if (--task.dependencies[child] == 0) {
        ready.push_back({e.function});
        std::push_heap(ready.begin(), ready.end());
      }
    }
  }
  // By index: a callback may queue another, which then runs in this same loop.
  for (size_t i = 0; i < task.final_callbacks.size(); ++i) {
    std::function<void()> fn = std::move(task.final_callbacks[i]);
    fn();
  }
  return std::move(task.captured);
}

void queue_callback(std::function<void()> fn) {
  GRAFT_CHECK(t_current_task != nullptr, "queue_callback: final callbacks can only be installed during the backward pass");
  GRAFT_CHECK(fn != nullptr, "queue_callback: the callback is empty");
  t_current_task->final_callbacks.push_back(std::move(fn));
}

bool task_runs_without_capture(Node* sink) {
  GraphTask* t = t_current_task;
  if (t == nullptr) return false;
  if (t->exec_info.empty()) return true;
  auto it = t->exec_info.find(sink);
  return it != t->exec_info.end() && it->second.needed && it->second.captures.empty();
}

namespace {

variable_list make_root_grads(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grads, const char* api) {
  GRAFT_CHECK(grads.empty() || grads.size() == tensors.size(), api, ": got ", grads.size(), " gradients for ",
              tensors.size(), " tensors");
  variable_list out(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    GRAFT_CHECK(t.defined(), api, ": element ", i, " of tensors is undefined");
    GRAFT_CHECK(tensor_requires_grad(t), api, ": element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    if (!grads.empty() && grads[i].defined()) {
      GRAFT_CHECK(grads[i].sizes() == t.sizes(), api, ": mismatch in shape: grad_output[", i, "] has a shape of ",
                  shape_str(grads[i].sizes()), " and output[", i, "] has a shape of ", shape_str(t.sizes()));
      out[i] = grads[i];
    } else {
      GRAFT_CHECK(t.numel() == 1, api, ": grad can be implicitly created only for scalar outputs (element ", i,
                  " has shape ", shape_str(t.sizes()), ")");
      out[i] = ops::ones_like(t);
    }
  }
  return out;
}

std::vector<Edge> root_edges(const std::vector<Tensor>& tensors) {
  std::vector<Edge> roots;
  roots.reserve(tensors.size());
  for (const auto& t : tensors) roots.push_back(gradient_edge(t));
  return roots;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  variable_list grads = make_root_grads(tensors, grad_tensors, "backward");
  bool keep = retain_graph.value_or(create_graph);
  std::vector<Edge> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    GRAFT_CHECK(inputs[i].defined() && tensor_requires_grad(inputs[i]), "backward: inputs[", i,
                "] does not require grad");
    outs.push_back(gradient_edge(inputs[i]));
  }
  variable_list captured = run_backward(root_edges(tensors), std::move(grads), keep, create_graph, outs, true);
  // Non-leaf inputs= accumulate into their .grad, as torch.autograd.backward does.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!captured[i].defined()) continue;
    GradModeGuard mode(create_graph);
    accumulate_into_grad(inputs[i], captured[i]);
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  GRAFT_CHECK(!inputs.empty(), "grad: requires at least one input");
  variable_list grads = make_root_grads(outputs, grad_outputs, "grad");
  std::vector<Edge> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    GRAFT_CHECK(inputs[i].defined() && tensor_requires_grad(inputs[i]), "grad: One of the differentiated Tensors (",
                "input ", i, ", ", describe(inputs[i]), ") does not require grad");
    outs.push_back(gradient_edge(inputs[i]));
  }
  variable_list res = run_backward(root_edges(outputs), std::move(grads), retain_graph.value_or(create_graph),
                                   create_graph, outs, false);
  for (size_t i = 0; i < res.size(); ++i)
    GRAFT_CHECK(res[i].defined() || allow_unused, "grad: One of the differentiated Tensors (input ", i,
                ") appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.");
  return res;
}

GradientEdge get_gradient_edge(const Tensor& t) {
  GRAFT_CHECK(t.defined(), "get_gradient_edge: the tensor is undefined");
  GRAFT_CHECK(tensor_requires_grad(t), "get_gradient_edge: It is not possible to get the gradient edge for a Tensor "
              "that does not require gradients (", describe(t), ")");
  Edge e = gradient_edge(t);
  return GradientEdge{e.function, e.input_nr};
}

namespace {
// A GradientEdge given to grad()/backward() as the `what` number i, checked against its node.
Edge checked_edge(const GradientEdge& e, const char* api, const char* what, size_t i) {
  GRAFT_CHECK(e.node != nullptr, api, ": ", what, " ", i, " is an empty GradientEdge");
  GRAFT_CHECK(e.output_nr < e.node->num_inputs(), api, ": ", what, " ", i, " names output ", e.output_nr, " of ",
              e.node->name(), ", which has ", e.node->num_inputs(), " outputs");
  return Edge{e.node, e.output_nr};
}
}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<GradientEdge>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  GRAFT_CHECK(!inputs.empty(), "grad: requires at least one input");
  variable_list grads = make_root_grads(outputs, grad_outputs, "grad");
  std::vector<Edge> outs;
  for (size_t i = 0; i < inputs.size(); ++i) outs.push_back(checked_edge(inputs[i], "grad", "input", i));
  variable_list res = run_backward(root_edges(outputs), std::move(grads), retain_graph.value_or(create_graph),
                                   create_graph, outs, false);
  for (size_t i = 0; i < res.size(); ++i)
    GRAFT_CHECK(res[i].defined() || allow_unused, "grad: One of the differentiated GradientEdges (input ", i, ", ",
                inputs[i].node->name(), ") appears to not have been used in the graph. Set allow_unused=true if this "
                "is the desired behavior.");
  return res;
}

void backward(const std::vector<GradientEdge>& roots, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<GradientEdge>& inputs) {
  GRAFT_CHECK(grad_tensors.size() == roots.size(), "backward: got ", grad_tensors.size(), " gradients for ",
              roots.size(), " gradient edges (each root edge needs its gradient)");
  std::vector<Edge> root_list;
  variable_list grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const GradientEdge& r = roots[i];
    root_list.push_back(checked_edge(r, "backward", "root", i));
    GRAFT_CHECK(grad_tensors[i].defined(), "backward: the gradient for root ", i, " (", r.node->name(), ") is undefined");
    const TensorMeta& m = r.node->input_metadata(r.output_nr);
    GRAFT_CHECK(grad_tensors[i].sizes() == m.shape, "backward: mismatch in shape: grad_tensors[", i, "] has a shape of ",
                shape_str(grad_tensors[i].sizes()), " and output ", r.output_nr, " of ", r.node->name(),
                " has a shape of ", shape_str(m.shape));
    grads.push_back(grad_tensors[i]);
  }
  std::vector<Edge> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    outs.push_back(checked_edge(inputs[i], "backward", "input", i));
    GRAFT_CHECK(inputs[i].node->accumulated_leaf() != nullptr, "backward: input ", i,
                " is a GradientEdge of ", inputs[i].node->name(), ", not of a leaf's AccumulateGrad; backward() "
                "accumulates into leaves only (use grad() with this edge instead)");
  }
  run_backward(root_list, std::move(grads), retain_graph.value_or(create_graph), create_graph, outs, true);
}

void increment_version(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined()) t.impl()->bump_version();
}

CaptureBeforeHooksGuard::CaptureBeforeHooksGuard() : prev_(std::exchange(t_captures_before_hooks, true)) {}
CaptureBeforeHooksGuard::~CaptureBeforeHooksGuard() { t_captures_before_hooks = prev_; }

int64_t current_graph_task_id() { return t_current_task ? t_current_task->id : -1; }

GraphTask* current_graph_task() { return t_current_task; }

bool runs_every_reachable_node(const GraphTask* task) { return task->exec_info.empty() && task->also_needed.empty(); }
bool keeps_graph(const GraphTask* task) { return task != nullptr && task->keep_graph; }

std::unique_ptr<GraphTaskState>& graph_task_slot(GraphTask* task, const void* owner) { return task->slots[owner]; }

bool will_engine_execute_node(const std::shared_ptr<Node>& node) {
  GraphTask* task = t_current_task;
  GRAFT_CHECK(task != nullptr, "will_engine_execute_node: should only be called during the backward pass");
  if (!node) return false;
  Node* n = node.get();
  if (task->also_needed.count(n)) return true;
  if (task->exec_info.empty()) {
    return task->dependencies.count(n) > 0 || std::find(task->roots.begin(), task->roots.end(), n) != task->roots.end();
  }
  auto it = task->exec_info.find(n);
  return it != task->exec_info.end() && (it->second.needed || !it->second.captures.empty());
}

void mark_node_needed(const std::shared_ptr<Node>& node) {
  GraphTask* task = t_current_task;
  GRAFT_CHECK(task != nullptr, "mark_node_needed: should only be called during the backward pass");
  if (node) task->also_needed.insert(node.get());
}

}  // namespace graft::autograd
