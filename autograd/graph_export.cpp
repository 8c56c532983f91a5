#include "autograd/graph_export.h"

#include <sstream>
#include <unordered_map>

#include "autograd/autograd_meta.h"
#include "autograd/saved_variable.h"

namespace graft::autograd {

namespace {

std::string bytes_str(int64_t b) {
  std::ostringstream os;
  if (b < 1024) os << b << " B";
  else if (b < 1024 * 1024) os << (b / 1024.0) << " KiB";
  else os << (b / (1024.0 * 1024.0)) << " MiB";
  return os.str();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string how_kept(const SavedVariable& sv) {
  if (sv.released()) return "freed";
  const std::string& k = sv.hook_kind();
  if (k.empty()) return "saved";
  if (k == "checkpoint") return "checkpointed";
  if (k == "save_on_cpu") return sv.device().is_cpu() ? "save_on_cpu, kept on cpu" : "offloaded to cpu";
  return "hooked (" + k + ")";
}

}  // namespace

std::string to_dot(const std::vector<Tensor>& roots, const std::vector<std::pair<std::string, Tensor>>& names) {
  std::unordered_map<const TensorImpl*, std::string> leaf_names;
  for (const auto& [n, t] : names)
    if (t.defined()) leaf_names[t.impl()] = n;
  std::unordered_map<const Node*, size_t> ids;
  std::vector<const Node*> order;
  auto visit = [&](const Node* n) {
    if (!ids.count(n)) {
      ids[n] = order.size();
      order.push_back(n);
    }
  };
  std::ostringstream os;
  os << "digraph graft_backward {\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  for (size_t i = 0; i < roots.size(); ++i) {
    GRAFT_CHECK(roots[i].defined(), "to_dot: root ", i, " is undefined");
    Edge e = gradient_edge(roots[i]);
    os << "  root" << i << " [shape=ellipse, label=\"root " << i << "\\n" << shape_str(roots[i].sizes()) << " "
       << dtype_name(roots[i].dtype()) << "\"];\n";
    if (!e.is_valid()) continue;
    visit(e.function.get());
    os << "  root" << i << " -> n" << ids[e.function.get()] << ";\n";
  }
  for (size_t k = 0; k < order.size(); ++k) {  // order grows while walking: breadth first
    const Node* n = order[k];
    std::string label = n->name();
    if (const Tensor* leaf = n->accumulated_leaf()) {
      const Tensor& v = *leaf;
      auto it = leaf_names.find(v.impl());
      label += "\\n" + (it != leaf_names.end() ? escape(it->second) + " " : std::string("leaf ")) +
               shape_str(v.sizes()) + " " + dtype_name(v.dtype());
    }
    int64_t total = 0;
    auto saved = n->saved_variables();
    for (size_t i = 0; i < saved.size(); ++i) {
      const SavedVariable& sv = *saved[i];
      if (!sv.was_defined()) continue;
      int64_t bytes = shape_numel(sv.shape()) * static_cast<int64_t>(element_size(sv.dtype()));
      total += bytes;
      label += "\\nsaved " + std::to_string(i) + ": " + shape_str(sv.shape()) + " " + dtype_name(sv.dtype()) + " " +
               bytes_str(bytes) + (sv.device().is_cpu() ? "" : " " + sv.device().str()) + " (" + how_kept(sv) + ")";
    }
    if (saved.size() > 1) label += "\\nsaved total: " + bytes_str(total);
    os << "  n" << k << " [label=\"" << label << "\"];\n";
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      visit(e.function.get());
      os << "  n" << k << " -> n" << ids[e.function.get()] << ";\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace graft::autograd
