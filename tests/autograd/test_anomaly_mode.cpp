// Anomaly mode (API.md "Graph features, second wave"): errors in backward name the failing node and
// the forward call that created it; check_nan turns NaN gradients into errors. Built with -O0 -g
// (tests/meson.build) so the forward call site resolves to this file's lines.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

struct Boom : Function<Boom> {
  static Tensor forward(FunctionCtx*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor>) { throw Error("boom in backward"); }
};

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an error in a custom Function's backward shows the node and the forward call site") {
  Tensor x = randn({3}).requires_grad_();
  std::string msg;
  int line = 0;
  {
    DetectAnomaly anomaly;
    Tensor y = Boom::apply(x); line = __LINE__;
    msg = what_of([&] { y.sum().backward(); });
  }
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("boom in backward"));
  CHECK_THAT(msg, Catch::Contains("Error detected in CppNode<") && Catch::Contains("Boom>"));
  CHECK_THAT(msg, Catch::Contains("Traceback of forward call that caused the error"));
  CHECK_THAT(msg, Catch::Contains("test_anomaly_mode.cpp:" + std::to_string(line)));
  // Off: the plain message only.
  Tensor y = Boom::apply(x);
  std::string plain = what_of([&] { y.sum().backward(); });
  CHECK(plain == "boom in backward");
}

TEST_CASE("an error in a tensor hook during backward names the node the hook runs on") {
  DetectAnomaly anomaly;
  Tensor x = randn({3}).requires_grad_();
  Tensor y = x.exp();
  Tensor z = y * 3;
  y.register_hook([](const Tensor&) -> Tensor { throw Error("hook failed"); });
  std::string msg = what_of([&] { z.sum().backward(); });
  CHECK_THAT(msg, Catch::Contains("hook failed") && Catch::Contains("Error detected in ExpBackward"));
  CHECK_THAT(msg, Catch::Contains("test_anomaly_mode.cpp:"));
}

TEST_CASE("check_nan: a node returning NaN throws PyTorch's message; off without it") {
  Tensor x = tensor({-1.0, 4.0}, dtype(kFloat64)).requires_grad_();
  {
    DetectAnomaly anomaly;  // check_nan defaults to true
    Tensor y = x.sqrt();    // NaN at -1, and so is its gradient
    CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("Function 'SqrtBackward' returned nan values in its 0th output."));
  }
  {
    DetectAnomaly anomaly(/*check_nan=*/false);
    Tensor y = x.sqrt();
    y.sum().backward();
    CHECK(std::isnan(x.grad().to_vector<double>()[0]));
  }
  x.mutable_grad() = Tensor();
  Tensor y = x.sqrt();
  y.sum().backward();  // anomaly mode off: no check
  CHECK(std::isnan(x.grad().to_vector<double>()[0]));
}

TEST_CASE("set_detect_anomaly switches the thread's mode; DetectAnomaly restores the previous one") {
  CHECK_FALSE(is_anomaly_enabled());
  set_detect_anomaly(true);
  CHECK(is_anomaly_enabled());
  {
    DetectAnomaly inner(false);
    CHECK(is_anomaly_enabled());
  }
  CHECK(is_anomaly_enabled());
  set_detect_anomaly(false);
  CHECK_FALSE(is_anomaly_enabled());
  {
    DetectAnomaly a;
    CHECK(is_anomaly_enabled());
  }
  CHECK_FALSE(is_anomaly_enabled());
}

TEST_CASE("a checkpoint recomputation failure under anomaly mode names the node whose unpack failed") {
  DetectAnomaly anomaly;
  Tensor x = randn({4}).requires_grad_();
  int calls = 0;
  Tensor y = checkpoint([&](const Tensor& h) { return (++calls == 1 ? h : h.slice(0, 0, 2)).exp().sum(); }, x);
  std::string msg = what_of([&] { y.backward(); });
  CHECK_THAT(msg, Catch::Contains("different metadata") && Catch::Contains("Error detected in ExpBackward"));
}

TEST_CASE("an error raised inside a built-in rule (a freed saved tensor) carries the node name and forward trace") {
  DetectAnomaly anomaly;
  Tensor x = randn({3}).requires_grad_();
  Tensor y = x.sigmoid();  // SigmoidBackward saves its output, freed by the first backward
  Tensor s = y.sum();
  s.backward();
  std::string msg = what_of([&] { s.backward(); });
  CHECK_THAT(msg, Catch::Contains("Trying to backward through the graph a second time") &&
                      Catch::Contains("Error detected in SigmoidBackward") &&
                      Catch::Contains("test_anomaly_mode.cpp:"));
}

TEST_CASE("is_anomaly_check_nan_enabled gives PyTorch's values: true by default, after a scope ends and after switching off") {
  // torch.is_anomaly_check_nan_enabled() reads the check_nan flag alone, whether or not anomaly mode
  // is on; set_detect_anomaly's check_nan defaults to true and detect_anomaly restores the old one.
  CHECK_FALSE(is_anomaly_enabled());
  CHECK(is_anomaly_check_nan_enabled());
  {
    DetectAnomaly anomaly(/*check_nan=*/false);
    CHECK(is_anomaly_enabled());
    CHECK_FALSE(is_anomaly_check_nan_enabled());
  }
  CHECK_FALSE(is_anomaly_enabled());
  CHECK(is_anomaly_check_nan_enabled());
  set_detect_anomaly(true, /*check_nan=*/false);
  CHECK_FALSE(is_anomaly_check_nan_enabled());
  set_detect_anomaly(false);
  CHECK_FALSE(is_anomaly_enabled());
  CHECK(is_anomaly_check_nan_enabled());
  set_detect_anomaly(false, /*check_nan=*/false);
  CHECK_FALSE(is_anomaly_check_nan_enabled());
  set_detect_anomaly(false);
  // The flag alone checks nothing: with anomaly mode off a NaN gradient goes through.
  Tensor x = tensor({-1.0}, dtype(kFloat64)).requires_grad_();
  x.sqrt().sum().backward();
  CHECK(std::isnan(x.grad().to_vector<double>()[0]));
}
