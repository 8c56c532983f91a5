#include "train/memory_timeline_chart.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace graft::train {

namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace

TimelineSeries record_timeline(const std::string& label, Device device, const std::function<void()>& step) {
  memory_log_start(device);
  try {
    step();
  } catch (...) {
    memory_log_stop();
    throw;
  }
  return {label, memory_log_stop()};
}

void write_memory_timeline(const std::string& path, const std::vector<TimelineSeries>& series) {
  const double W = 900, H = 420, L = 70, R = 20, T = 40, B = 60;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  double lo = 0, hi = 1;
  for (const auto& s : series) {
    if (s.budget_bytes >= 0) hi = std::max(hi, static_cast<double>(s.budget_bytes) / (1 << 20));
    for (const auto& e : s.events) {
      lo = std::min(lo, static_cast<double>(e.bytes) / (1 << 20));
      hi = std::max(hi, static_cast<double>(e.bytes) / (1 << 20));
    }
  }
  auto X = [&](double frac) { return L + frac * (W - L - R); };
  auto Y = [&](double mib) { return H - B - (mib - lo) / (hi - lo) * (H - T - B); };
  std::ofstream f(path);
  GRAFT_CHECK(f.good(), "memory timeline: cannot write ", path);
  f << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<text x=\"" << L << "\" y=\"22\" font-size=\"14\">Memory allocated during one training step "
    << "(MiB above its start; forward, then backward)</text>\n";
  // Axes and y ticks.
  f << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"#444\"/>\n"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"#444\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double v = lo + (hi - lo) * i / 4;
    f << "<text x=\"" << L - 6 << "\" y=\"" << fmt(Y(v) + 4) << "\" text-anchor=\"end\">" << fmt(v) << "</text>\n";
  }
  f << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - B + 20 << "\" text-anchor=\"middle\">fraction of the step</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* c = colors[k % 5];
    double end = s.events.empty() ? 1 : std::max(1e-9, s.events.back().t_ms);
    // A step line: each event moves the level at its time.
    std::ostringstream d;
    d << "M" << fmt(X(0)) << " " << fmt(Y(0));
    size_t peak = 0;
    for (size_t i = 0; i < s.events.size(); ++i) {
      const auto& e = s.events[i];
      d << " H" << fmt(X(e.t_ms / end)) << " V" << fmt(Y(static_cast<double>(e.bytes) / (1 << 20)));
      if (e.bytes > s.events[peak].bytes) peak = i;
    }
    f << "<path d=\"" << d.str() << "\" fill=\"none\" stroke=\"" << c << "\" stroke-width=\"1.5\"/>\n";
    if (s.budget_bytes >= 0) {
      const double by = Y(static_cast<double>(s.budget_bytes) / (1 << 20));
      f << "<line x1=\"" << X(0) << "\" y1=\"" << fmt(by) << "\" x2=\"" << X(1) << "\" y2=\"" << fmt(by)
        << "\" stroke=\"" << c << "\" stroke-dasharray=\"6 4\"/>\n"
        << "<text x=\"" << fmt(X(1) - 4) << "\" y=\"" << fmt(by - 4) << "\" text-anchor=\"end\" fill=\"" << c
        << "\">budget " << fmt(static_cast<double>(s.budget_bytes) / (1 << 20)) << " MiB</text>\n";
    }
    double peak_mib = s.events.empty() ? 0 : static_cast<double>(s.events[peak].bytes) / (1 << 20);
    if (!s.events.empty()) {
      const auto& e = s.events[peak];
      f << "<text x=\"" << fmt(X(e.t_ms / end) + 4) << "\" y=\"" << fmt(Y(peak_mib) - 4) << "\" fill=\"" << c << "\">"
        << xml_escape(e.op.empty() ? "(autograd)" : e.op) << "</text>\n";
    }
    double ly = H - B + 38 + 0;
    double lx = L + static_cast<double>(k) * 260;
    f << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"3\" fill=\"" << c << "\"/>\n"
      << "<text x=\"" << lx + 16 << "\" y=\"" << ly << "\">" << xml_escape(s.label) << ": peak " << fmt(peak_mib)
      << " MiB</text>\n";
  }
  f << "</svg>\n";
  GRAFT_CHECK(f.good(), "memory timeline: writing ", path, " failed");
}

}  // namespace graft::train
