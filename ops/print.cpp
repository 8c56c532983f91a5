// Follows torch/_tensor_str.py's observable rules: one width for all elements, integer-valued
// floats print as "1.", fixed 4 decimals otherwise, scientific when the magnitudes span more than
// 1000x (or exceed 1e8 / fall below 1e-4), summarised with "..." above 1000 elements (3 edge items),
// rows wrapped at 80 columns.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/print.h"

namespace graft {

namespace {

std::atomic<PrintSuffixHook> g_suffix{nullptr};

constexpr int64_t kThreshold = 1000, kEdge = 3, kLineWidth = 80;

struct Formatter {
  DType dtype;
  bool int_mode = true, sci_mode = false;
  size_t width = 1;

  std::string raw(double v) const {
    char buf[64];
    if (dtype == kBool) return v != 0 ? "True" : "False";
    if (is_integral(dtype, false)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (int_mode) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
  std::string format(double v) const {
    std::string s = raw(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

// Values that will be shown (the summarised edges when summarising), for choosing the format.
void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(kernels::read_as_double(t.data_ptr(), t.dtype(), 0));
    return;
  }
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) i = n - kEdge;
    collect(t.select(0, i), summarize, out);
  }
}

Formatter make_formatter(const Tensor& t, bool summarize) {
  Formatter f{t.dtype()};
  std::vector<double> vals;
  collect(t, summarize, vals);
  if (is_floating(t.dtype())) {
    std::vector<double> finite;
    for (double v : vals)
      if (std::isfinite(v)) {
        finite.push_back(std::fabs(v));
        if (v != std::ceil(v)) f.int_mode = false;
      }
    std::vector<double> nz;
    for (double v : finite)
      if (v != 0) nz.push_back(v);
    if (!nz.empty()) {
      double mx = *std::max_element(nz.begin(), nz.end()), mn = *std::min_element(nz.begin(), nz.end());
      if (f.int_mode) f.sci_mode = mx / mn > 1000.0 || mx > 1e8;
      else f.sci_mode = mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4;
    }
  }
  for (double v : vals) f.width = std::max(f.width, f.raw(v).size());
  return f;
}

void print_rec(std::ostringstream& os, const Tensor& t, const Formatter& f, bool summarize, int64_t indent) {
  if (t.dim() == 0) {
    os << f.format(kernels::read_as_double(t.data_ptr(), t.dtype(), 0));
    return;
  }
  int64_t n = t.size(0);
  os << '[';
  if (t.dim() == 1) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdge && i == kEdge) {
        items.emplace_back(" ...");
        i = n - kEdge;
      }
      items.push_back(f.format(kernels::read_as_double(t.data_ptr(), t.dtype(), i * t.stride(0))));
    }
    size_t per_line = static_cast<size_t>(std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(f.width + 2)));
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) os << (i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ");
      os << items[i];
    }
  } else {
    std::string sep = "," + std::string(static_cast<size_t>(t.dim() - 1), '\n') + std::string(indent + 1, ' ');
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) os << sep;
      if (summarize && n > 2 * kEdge && i == kEdge) {
        os << "..." << sep;
        i = n - kEdge;
      }
      print_rec(os, t.select(0, i), f, summarize, indent + 1);
    }
  }
  os << ']';
}

}  // namespace

void set_print_suffix_hook(PrintSuffixHook hook) { g_suffix.store(hook); }

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "[ Tensor (undefined) ]";
  Tensor host = ops::to_device(t, kCPU);
  bool summarize = host.numel() > kThreshold;
  std::ostringstream os;
  os << "tensor(";
  std::vector<std::string> suffixes;
  if (host.numel() == 0) {
    os << "[]";
    if (host.dim() != 1) {
      std::ostringstream sz;
      sz << "size=(";
      for (int64_t i = 0; i < host.dim(); ++i) sz << (i ? ", " : "") << host.size(i);
      sz << (host.dim() == 1 ? ",)" : ")");
      suffixes.push_back(sz.str());
    }
  } else {
    Formatter f = make_formatter(host, summarize);
    print_rec(os, host, f, summarize, 7);
  }
  if (t.is_cuda()) suffixes.push_back("device='" + t.device().str() + "'");
  bool default_dtype = t.dtype() == kFloat32 || t.dtype() == kInt64 || t.dtype() == kBool;
  if (!default_dtype || (host.numel() == 0 && t.dtype() != kFloat32))
    suffixes.push_back(std::string("dtype=torch.") + dtype_name(t.dtype()));
  if (auto hook = g_suffix.load()) {
    std::string s = hook(t);
    if (!s.empty()) suffixes.push_back(s);
  }
  // A suffix that would pass the line width goes on a line of its own, indented under the values
  // (torch/_tensor_str.py's _add_suffixes, including its count of the last line's length).
  std::string body = os.str();
  const size_t nl = body.rfind('\n');
  int64_t last_line = static_cast<int64_t>(nl == std::string::npos ? body.size() + 2 : body.size() - nl + 1);
  for (auto& s : suffixes) {
    const auto len = static_cast<int64_t>(s.size());
    if (last_line + len + 2 > kLineWidth) {
      os << ",\n" << std::string(7, ' ') << s;
      last_line = 7 + len;
    } else {
      os << ", " << s;
      last_line += len + 2;
    }
  }
  os << ')';
  return out << os.str();
}

}  // namespace graft
