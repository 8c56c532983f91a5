#include <catch2/catch.hpp>

#include <sstream>

#include "graft.h"

using namespace graft;

namespace {
std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST_CASE("integer-valued floats print with a trailing dot") {
  CHECK(str(tensor({1, 2, 3})) == "tensor([1., 2., 3.])");
  CHECK(str(tensor({-1, 10})) == "tensor([-1., 10.])");
}

TEST_CASE("fractional floats print with four decimals and a common width") {
  CHECK(str(tensor({0.5, 2.25, -10.125})) == "tensor([  0.5000,   2.2500, -10.1250])");
}

TEST_CASE("wide magnitude ranges switch to scientific notation") {
  CHECK(str(tensor({1e-5, 1.0})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(str(tensor({1, 100000})) == "tensor([1.0000e+00, 1.0000e+05])");
}

TEST_CASE("2-D tensors print one row per line aligned under the first") {
  Tensor t = arange(6, dtype(kFloat32)).view({2, 3});
  CHECK(str(t) == "tensor([[0., 1., 2.],\n        [3., 4., 5.]])");
  Tensor u = arange(8, dtype(kFloat32)).view({2, 2, 2});
  CHECK(str(u) == "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
}

TEST_CASE("int64, bool and float64 tensors print their values and a dtype suffix when not default") {
  CHECK(str(arange(3)) == "tensor([0, 1, 2])");
  CHECK(str(tensor(std::vector<bool>{true, false}, {2})) == "tensor([ True, False])");
  CHECK(str(tensor({1.5}, dtype(kFloat64))) == "tensor([1.5000], dtype=torch.float64)");
}

TEST_CASE("scalars and empty tensors print like PyTorch") {
  CHECK(str(scalar_tensor(3.0)) == "tensor(3.)");
  CHECK(str(scalar_tensor(int64_t{7})) == "tensor(7)");
  CHECK(str(ops::empty({0})) == "tensor([])");
  CHECK(str(ops::empty({0, 3})) == "tensor([], size=(0, 3))");
}

TEST_CASE("large tensors are summarised with ellipses") {
  CHECK(str(arange(2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  std::string s = str(arange(2000).view({100, 20}));
  CHECK(s.rfind("tensor([[   0,    1,    2,  ...,   17,   18,   19],\n", 0) == 0);
  CHECK(s.find("        ...,\n") != std::string::npos);
  CHECK(s.find("[1980, 1981, 1982,  ..., 1997, 1998, 1999]])") != std::string::npos);
  // Integer-valued floats whose shown magnitudes span more than 1000x print in scientific notation.
  std::string f = str(arange(2000, dtype(kFloat32)).view({100, 20}));
  CHECK(f.rfind("tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.7000e+01, 1.8000e+01,\n         1.9000e+01],", 0) == 0);
}

TEST_CASE("long rows wrap at 80 columns") {
  std::string s = str(arange(30, dtype(kFloat32)));
  CHECK(s == "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
             "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
             "        28., 29.])");
}

TEST_CASE("non-contiguous tensors print their logical order") {
  CHECK(str(arange(6, dtype(kFloat32)).view({2, 3}).t()) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
  CHECK(str(Tensor()) == "[ Tensor (undefined) ]");
}
