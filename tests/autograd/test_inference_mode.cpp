// InferenceMode (c10::InferenceMode): inference tensors carry no autograd state and no version
// counter, and are refused where autograd would need them.
#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

TEST_CASE("inside InferenceMode: grad mode is off, new tensors are inference tensors without history") {
  Tensor w = randn({3}).requires_grad_();
  Tensor normal = ones({3});
  CHECK_FALSE(normal.is_inference());
  {
    InferenceMode guard;
    CHECK_FALSE(is_grad_enabled());
    Tensor y = w * 2;
    CHECK(y.is_inference());
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    // No version counter on inference tensors; normal tensors keep theirs.
    int64_t v = y.version();
    y.add_(1);
    CHECK(y.version() == v);
    int64_t nv = normal.version();
    normal.add_(1);
    CHECK(normal.version() == nv + 1);
    // A view of a normal tensor is not an inference tensor.
    CHECK_FALSE(normal.select(0, 0).is_inference());
  }
  CHECK(is_grad_enabled());
}

TEST_CASE("an inference tensor saved for backward is refused with PyTorch's message") {
  Tensor x;
  {
    InferenceMode guard;
    x = ones({3});
  }
  Tensor w = randn({3}).requires_grad_();
  CHECK_THROWS_WITH(w * x, Catch::Contains("Inference tensors cannot be saved for backward") &&
                               Catch::Contains("MulBackward"));
  // Ops that save nothing of it are fine, gradients included.
  Tensor y = w + x;
  y.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("writing an inference tensor in place or making it require grad outside InferenceMode is an error") {
  Tensor x;
  {
    InferenceMode guard;
    x = zeros({2});
  }
  CHECK_THROWS_WITH(x.add_(1), Catch::Contains("Inplace update to inference tensor outside InferenceMode"));
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0});  // nothing was written
  CHECK_THROWS_WITH(x.requires_grad_(), Catch::Contains("Setting requires_grad=True on inference tensor outside InferenceMode"));
  Tensor c = x.clone();  // the documented way out
  CHECK_FALSE(c.is_inference());
  c.add_(1);
  CHECK(c.to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("InferenceMode(false) inside an enabled scope turns grad mode and inference tensors back off") {
  Tensor w = randn({2}).requires_grad_();
  InferenceMode outer;
  {
    InferenceMode inner(false);
    CHECK(is_grad_enabled());
    Tensor y = w * 3;
    CHECK_FALSE(y.is_inference());
    CHECK(y.requires_grad());
  }
  CHECK_FALSE(is_grad_enabled());
  CHECK((w * 3).is_inference());
}
