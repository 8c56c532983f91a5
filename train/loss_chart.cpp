#include "train/loss_chart.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

namespace {

// Round tick positions over [lo, hi]: a step of 1, 2 or 5 times a power of ten giving at most
// `max_ticks` intervals.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / max_ticks, mag = std::pow(10.0, std::floor(std::log10(raw))), step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

std::string tick_label(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << (std::abs(v) < 1e-12 ? 0.0 : v);
  return os.str();
}

// The chart's frame and scales: steps along x, loss on the left axis from 0 to a round top, test
// accuracy on the right from a whole 10% below its lowest point to 100%.
struct Chart {
  static constexpr double W = 760, H = 400, L = 60, R = 60, T = 40, B = 50;
  double steps = 1, per_epoch = 1, ltop = 1, abot = 0;
  std::vector<double> lticks, aticks;
  double px(double step) const { return L + (W - L - R) * step / steps; }
  double py_loss(double v) const { return H - B - (H - T - B) * v / ltop; }
  double py_acc(double a) const { return H - B - (H - T - B) * (a - abot) / (1.0 - abot); }
  double epoch_x(size_t e) const { return px(per_epoch * static_cast<double>(e)); }  // the end of epoch e (from 1)
};

Chart make_chart(const std::vector<double>& step_loss, const std::vector<double>& acc) {
  Chart c;
  c.steps = std::max<double>(1, static_cast<double>(step_loss.size()));
  c.per_epoch = acc.empty() ? c.steps : c.steps / static_cast<double>(acc.size());
  double maxl = 0;
  for (double v : step_loss) maxl = std::max(maxl, v);
  std::vector<double> lticks = nice_ticks(0, maxl > 0 ? maxl : 1, 6);
  c.ltop = lticks.back() < maxl ? lticks.back() + (lticks.size() > 1 ? lticks[1] - lticks[0] : 1) : lticks.back();
  if (c.ltop <= 0) c.ltop = 1;
  c.lticks = nice_ticks(0, c.ltop, 6);
  double amin = 1;
  for (double a : acc) amin = std::min(amin, a);
  c.abot = std::max(0.0, std::floor((amin - 0.05) * 10) / 10);
  c.aticks = nice_ticks(c.abot, 1.0, 5);
  return c;
}

// Title, grid, the three axes' ticks, dashed epoch boundaries, axes.
void write_frame(std::ostream& f, const Chart& c, size_t epochs) {
  const double W = Chart::W, H = Chart::H, L = Chart::L, R = Chart::R, T = Chart::T, B = Chart::B;
  f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << L << "\" y=\"20\" font-size=\"14\">graft train: training loss and test accuracy</text>\n";
  for (double t : c.lticks) {  // grid and left ticks (loss)
    double y = c.py_loss(t);
    f << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << W - R << "\" y2=\"" << y
      << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
      << tick_label(t) << "</text>\n";
  }
  for (double t : c.aticks)  // right ticks (accuracy)
    f << "<text x=\"" << W - R + 6 << "\" y=\"" << c.py_acc(t) + 4 << "\" fill=\"#c85a00\">" << tick_label(100 * t)
      << "%</text>\n";
  for (double t : nice_ticks(0, c.steps, 8)) {  // bottom ticks (steps) and vertical grid
    double x = c.px(t);
    f << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << H - B
      << "\" stroke=\"#f0f0f0\"/>\n<text x=\"" << x << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">"
      << tick_label(t) << "</text>\n";
  }
  for (size_t e = 1; e <= epochs; ++e) {
    double x = c.epoch_x(e);
    f << "<line class=\"epoch\" x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << H - B
      << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n<text x=\"" << x - 4 << "\" y=\"" << T + 12
      << "\" text-anchor=\"end\" fill=\"#666\">epoch " << e << "</text>\n";
  }
  f << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << W - R << "\" y1=\"" << T << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">training step</text>\n";
}

// The two series, then the legend in the title row (the plot area belongs to the data and the
// epoch labels), closing the document.
void write_series(std::ostream& f, const Chart& c, const std::vector<double>& step_loss, const std::vector<double>& acc) {
  f << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" points=\"";
  for (size_t i = 0; i < step_loss.size(); ++i) f << c.px(static_cast<double>(i + 1)) << ',' << c.py_loss(step_loss[i]) << ' ';
  f << "\"/>\n<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"2\" points=\"";
  for (size_t e = 0; e < acc.size(); ++e) f << c.epoch_x(e + 1) << ',' << c.py_acc(acc[e]) << ' ';
  f << "\"/>\n";
  for (size_t e = 0; e < acc.size(); ++e)
    f << "<circle cx=\"" << c.epoch_x(e + 1) << "\" cy=\"" << c.py_acc(acc[e]) << "\" r=\"3.5\" fill=\"#ff7f0e\"/>\n";
  const double lx = Chart::W - Chart::R - 330, ly = 20;
  f << "<g class=\"legend\"><line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 22 << "\" y2=\"" << ly - 4
    << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" << lx + 28 << "\" y=\"" << ly << "\">training loss (left)</text>\n"
    << "<line x1=\"" << lx + 170 << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 192 << "\" y2=\"" << ly - 4
    << "\" stroke=\"#ff7f0e\" stroke-width=\"2\"/><text x=\"" << lx + 198 << "\" y=\"" << ly
    << "\">test accuracy (right)</text></g>\n</svg>\n";
}

}  // namespace

LossChart::LossChart(std::string path) : path_(std::move(path)) {}

void LossChart::on_step_end(TrainerState& s) { step_losses_.push_back(s.step_loss); }

void LossChart::on_epoch_end(TrainerState& s) {
  if (const EvalResult* ev = s.fresh_eval()) accuracies_.push_back(ev->accuracy);
}

void LossChart::on_train_end(TrainerState&) { write_loss_chart(path_, step_losses_, accuracies_); }

void write_loss_chart(const std::string& path, const std::vector<double>& step_loss,
                      const std::vector<double>& accuracy) {
  std::ofstream f(path);
  GRAFT_CHECK(f.good(), "train: cannot write ", path);
  const Chart c = make_chart(step_loss, accuracy);
  write_frame(f, c, accuracy.size());
  write_series(f, c, step_loss, accuracy);
}

std::string LossChart::save_state() {
  return nlohmann::json{{"step_losses", step_losses_}, {"accuracies", accuracies_}}.dump();
}

void LossChart::load_state(const std::string& state) {
  try {
    const auto j = nlohmann::json::parse(state);
    step_losses_ = j.at("step_losses").get<std::vector<double>>();
    accuracies_ = j.at("accuracies").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    GRAFT_ERROR("LossChart: the checkpoint's chart state does not read: ", e.what());
  }
}

}  // namespace graft::train
