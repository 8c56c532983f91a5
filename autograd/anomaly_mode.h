#pragma once
// Anomaly detection, as torch.autograd.detect_anomaly / set_detect_anomaly.
//
// Invariants:
// 1. Off (the default) it costs one thread-local load when a node is created and one per
//    backward: no stack capture, no try/catch around a node, no NaN scan.
// 2. On, every node records the return addresses of the forward call that created it
//    (backtrace(3), no symbolisation: a few hundred ns). Symbols, files and lines are resolved by
//    libdw (elfutils) only when an error is reported, so the forward stays cheap.
// 3. An exception escaping a node while it runs (its hooks, a derivative rule, a custom
//    Function's backward, a checkpoint recomputation) is rethrown as graft::Error whose what()
//    keeps the original message and adds the node's name and the forward call's stack.
// 4. With check_nan, a floating output of a node containing NaN throws PyTorch's message
//    ("Function 'MulBackward' returned nan values in its 0th output."). Only while anomaly mode
//    is on: check_nan alone checks nothing.
// 5. check_nan is a flag of its own, as torch.is_anomaly_check_nan_enabled(): true by default,
//    set by every DetectAnomaly / set_detect_anomaly (whose check_nan defaults to true) and
//    restored when a DetectAnomaly scope ends, whether anomaly mode is on or off.
// The switch is thread-local like grad mode (API.md; PyTorch's is process-wide); backward reads it
// in the thread that runs it.
#include <memory>
#include <string>
#include <vector>

namespace graft::autograd {

class DetectAnomaly {
 public:
  explicit DetectAnomaly(bool check_nan = true);
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  bool prev_enabled_, prev_check_nan_;
};

void set_detect_anomaly(bool enabled, bool check_nan = true);
bool is_anomaly_enabled();
bool is_anomaly_check_nan_enabled();  // invariant 5

// The raw stack of the forward call that created a node (see invariant 2).
struct ForwardTrace {
  std::vector<void*> frames;
};
// Null when anomaly mode is off.
std::shared_ptr<const ForwardTrace> capture_forward_trace();
// "  #0 fn at file:line\n ..." for the frames outside graft's own library (the user's code).
std::string format_forward_trace(const ForwardTrace& trace);

}  // namespace graft::autograd
