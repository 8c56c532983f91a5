// bfloat16, float16, uint8 and int32 as first-class dtypes: printing (PyTorch 2.15's strings),
// factories, random fills, to(dtype) between every pair (PyTorch's conversions of out-of-range,
// NaN and float64 values), item(), integer arithmetic wrapping, and Module::to(kBFloat16).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "graft.h"

using namespace graft;

namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

std::vector<int64_t> bits16(const Tensor& t) {
  std::vector<int64_t> out;
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint16_t*>(c.data_ptr());
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(p[i]);
  return out;
}

constexpr DType kAll[] = {kFloat32, kFloat64, kInt64, kBool, kBFloat16, kFloat16, kUInt8, kInt32};

}  // namespace

TEST_CASE("bfloat16, float16, uint8 and int32 tensors print as PyTorch prints them") {
  // Expected strings: PyTorch 2.15's str() of the same tensors.
  CHECK(str(tensor({0.1, 1.0 / 3, -2.5}, dtype(kBFloat16))) ==
        "tensor([ 0.1001,  0.3340, -2.5000], dtype=torch.bfloat16)");
  CHECK(str(tensor({1, 2, 300}, dtype(kBFloat16))) == "tensor([  1.,   2., 300.], dtype=torch.bfloat16)");
  // A suffix that would pass 80 columns goes on its own line.
  CHECK(str(tensor({0.1, 1.0 / 3, 65504, INFINITY, NAN}, dtype(kFloat16))) ==
        "tensor([9.9976e-02, 3.3325e-01, 6.5504e+04,        inf,        nan],\n       dtype=torch.float16)");
  CHECK(str(tensor({1e-5, 1.0}, dtype(kFloat16))) == "tensor([1.0014e-05, 1.0000e+00], dtype=torch.float16)");
  CHECK(str(tensor({0, 7, 255}, dtype(kUInt8))) == "tensor([  0,   7, 255], dtype=torch.uint8)");
  CHECK(str(tensor(std::vector<int64_t>{-1, INT32_MAX, INT32_MIN, 7}, {2, 2}, dtype(kInt32))) ==
        "tensor([[         -1,  2147483647],\n        [-2147483648,           7]], dtype=torch.int32)");
  CHECK(str(scalar_tensor(2.5, dtype(kBFloat16))) == "tensor(2.5000, dtype=torch.bfloat16)");
  CHECK(str(scalar_tensor(3, dtype(kInt32))) == "tensor(3, dtype=torch.int32)");
  CHECK(str(ops::empty({0}, kUInt8)) == "tensor([], dtype=torch.uint8)");
  CHECK(str(ops::full({2}, 1.1, kFloat16)) == "tensor([1.0996, 1.0996], dtype=torch.float16)");
}

TEST_CASE("factories make bfloat16, float16, uint8 and int32 tensors") {
  for (DType dt : {kBFloat16, kFloat16, kUInt8, kInt32}) {
    INFO(dt);
    CHECK(zeros({2, 3}, dtype(dt)).dtype() == dt);
    CHECK(values(zeros({2, 3}, dtype(dt))) == std::vector<double>(6, 0));
    CHECK(values(ones({4}, dtype(dt))) == std::vector<double>(4, 1));
    CHECK(values(full({3}, 7, dtype(dt))) == std::vector<double>(3, 7));
    CHECK(empty({5, 2}, dtype(dt)).nbytes() == 10 * element_size(dt));
    CHECK(values(arange(5, dtype(dt))) == std::vector<double>{0, 1, 2, 3, 4});
    CHECK(values(zeros_like(ones({2}, dtype(dt)))) == std::vector<double>{0, 0});
  }
  // Rounded once from the exact value (PyTorch's bits).
  CHECK(bits16(full({1}, 0.1, dtype(kBFloat16))) == std::vector<int64_t>{15821});
  CHECK(bits16(arange(0, 3.3, 0.7, dtype(kFloat16))) == std::vector<int64_t>{0, 14746, 15770, 16435, 16794});
  CHECK(values(arange(0, 1, 0.25, dtype(kBFloat16))) == std::vector<double>{0, 0.25, 0.5, 0.75});
  // Integer fills as PyTorch's: -1 in uint8 is 255, a float fill truncates.
  CHECK(values(full({1}, -1, dtype(kUInt8))) == std::vector<double>{255});
  CHECK(values(full({1}, -2.7, dtype(kInt32))) == std::vector<double>{-2});
}

TEST_CASE("random fills in bfloat16 and float16 are float32's stream rounded once") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO(dt);
    manual_seed(1234);
    Tensor ref_n = randn({1001});
    Tensor ref_u = rand({1001});
    manual_seed(1234);
    Tensor n = randn({1001}, dtype(dt));
    Tensor u = rand({1001}, dtype(dt));
    CHECK(n.dtype() == dt);
    CHECK(bits16(n) == bits16(ref_n.to(dt)));
    CHECK(bits16(u) == bits16(ref_u.to(dt)));
    // Not a degenerate stream: many distinct values.
    std::vector<double> v = values(n);
    std::sort(v.begin(), v.end());
    CHECK(std::unique(v.begin(), v.end()) - v.begin() > 200);
  }
}

TEST_CASE("to(dtype) converts between every pair of dtypes, contiguous and strided") {
  for (DType from : kAll)
    for (DType to : kAll) {
      INFO(from << " -> " << to);
      Tensor src = tensor({0, 1, 2, 100, 3, 0}, dtype(from));  // bool: {0, 1, 1, 1, 1, 0}
      std::vector<double> want = values(src);
      if (to == kBool)
        for (double& w : want) w = w != 0;
      Tensor c = src.to(to);
      CHECK(c.dtype() == to);
      CHECK(values(c) == want);
      // Strided: a transposed view takes the element-by-element path.
      Tensor s = src.view({2, 3}).t().to(to);
      CHECK(values(s.t().contiguous().view({6})) == want);
    }
}

TEST_CASE("conversions of out-of-range, NaN and float64 values give PyTorch's results") {
  // PyTorch 2.15's results for the same inputs.
  const std::vector<double> in = {-1.0, -1.5, 255.5, 256.0, 300.7, -300.7, 1e10, NAN, INFINITY};
  for (DType src : {kFloat32, kFloat64}) {
    INFO(src);
    Tensor x = tensor(in, {9}, dtype(kFloat64)).to(src);
    CHECK(values(x.to(kUInt8)) == std::vector<double>{255, 255, 255, 0, 44, 212, 0, 0, 0});
    CHECK(values(x.to(kInt32)) == std::vector<double>{-1, -1, 255, 256, 300, -300, INT32_MIN, INT32_MIN, INT32_MIN});
    CHECK(values(x.view({3, 3}).t().to(kUInt8).t().contiguous().view({9})) ==
          std::vector<double>{255, 255, 255, 0, 44, 212, 0, 0, 0});
  }
  Tensor b = tensor(in, {9}, dtype(kBFloat16));  // 255.5 rounds to 256 in bfloat16 first
  CHECK(values(b.to(kUInt8)) == std::vector<double>{255, 255, 0, 0, 44, 212, 0, 0, 0});
  CHECK(values(b.to(kInt32)) == std::vector<double>{-1, -1, 256, 256, 300, -300, INT32_MIN, INT32_MIN, INT32_MIN});
  CHECK(values(b.to(kInt64))[7] == static_cast<double>(INT64_MIN));
  Tensor i = tensor(std::vector<int64_t>{-1, 256, int64_t{1} << 31, (int64_t{1} << 40) + 5}, {4});
  CHECK(values(i.to(kUInt8)) == std::vector<double>{255, 0, 0, 5});
  CHECK(values(i.to(kInt32)) == std::vector<double>{-1, 256, INT32_MIN, 5});
  // float64 -> 16 bits goes through float32, as c10 (two roundings): 1 + 2^-8 + 2^-40 becomes the
  // float32 tie 1 + 2^-8, which rounds to even (1.0) in bfloat16.
  Tensor d = tensor({1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                     65519.99999},
                    dtype(kFloat64));
  CHECK(bits16(d.to(kBFloat16)) == std::vector<int64_t>{16256, 16256, 18304});
  CHECK(bits16(d.to(kFloat16)) == std::vector<int64_t>{15364, 15360, 31744});
  // To bool: NaN is true, -0.0 false.
  CHECK(tensor({0.0, -0.0, NAN, 0.1}, dtype(kBFloat16)).to(kBool).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true});
}

TEST_CASE("item reads bfloat16, float16, uint8 and int32 tensors") {
  CHECK(static_cast<float>(scalar_tensor(2.5, dtype(kBFloat16)).item<BFloat16>()) == 2.5f);
  CHECK(static_cast<float>(scalar_tensor(-0.75, dtype(kFloat16)).item<Half>()) == -0.75f);
  CHECK(scalar_tensor(200, dtype(kUInt8)).item<uint8_t>() == 200);
  CHECK(scalar_tensor(-123456, dtype(kInt32)).item<int32_t>() == -123456);
  CHECK(scalar_tensor(0.1, dtype(kBFloat16)).item<float>() == static_cast<float>(BFloat16(0.1f)));
  CHECK(scalar_tensor(250, dtype(kUInt8)).item<int64_t>() == 250);
  CHECK(ones({3}, dtype(kInt32)).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1});
  CHECK_THROWS_WITH(ones({2}, dtype(kInt32)).item<int32_t>(), Catch::Contains("2 elements"));
}

TEST_CASE("elementwise ops on int32 and uint8 compute in int64 and store wrapped") {
  Tensor u = tensor({200, 3, 16}, dtype(kUInt8));
  CHECK(values(u + tensor({100, 5, 16}, dtype(kUInt8))) == std::vector<double>{44, 8, 32});
  CHECK(values(u - tensor({100, 5, 16}, dtype(kUInt8))) == std::vector<double>{100, 254, 0});
  CHECK(values(u * tensor({2, 3, 16}, dtype(kUInt8))) == std::vector<double>{144, 9, 0});
  CHECK(values(u + 300) == std::vector<double>{244, 47, 60});
  CHECK((u + 300).dtype() == kUInt8);
  Tensor i = tensor(std::vector<int64_t>{INT32_MAX, INT32_MIN, 65536}, {3}, dtype(kInt32));
  CHECK(values(i + 1) == std::vector<double>{INT32_MIN, INT32_MIN + 1, 65537});
  CHECK(values(i * tensor(std::vector<int64_t>{2, 2, 65536}, {3}, dtype(kInt32))) ==
        std::vector<double>{-2, 0, 0});
  CHECK((i * 2).dtype() == kInt32);
  // True division of integers is float32; with a 0-dim int64 the result stays int32.
  CHECK((u / tensor({2, 2, 2}, dtype(kUInt8))).dtype() == kFloat32);
  CHECK((i + scalar_tensor(int64_t{1})).dtype() == kInt32);
}

TEST_CASE("Module::to(kBFloat16) converts floating parameters and buffers, not integer ones, and back") {
  nn::Sequential net;
  net.emplace_back<nn::Conv2d>(2, 3, 3);
  net.emplace_back<nn::BatchNorm2d>(3);
  net.eval();  // the forward below must not move the running statistics
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : net.state_dict()) before[name] = t.clone();
  net.to(kBFloat16);
  for (const auto& [name, t] : net.named_parameters()) {
    INFO(name);
    CHECK(t.dtype() == kBFloat16);
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
    CHECK(bits16(t) == bits16(before.at(name).to(kBFloat16)));
  }
  for (const auto& [name, t] : net.named_buffers()) {
    INFO(name);
    CHECK(t.dtype() == (name.find("num_batches_tracked") != std::string::npos ? kInt64 : kBFloat16));
  }
  // A forward pass in bf16 gives bf16.
  Tensor y = net.forward(randn({2, 2, 5, 5}).to(kBFloat16));
  CHECK(y.dtype() == kBFloat16);
  net.to(kFloat32);
  for (const auto& [name, t] : net.state_dict()) {
    INFO(name);
    CHECK(t.dtype() == before.at(name).dtype());
    if (is_floating(t.dtype())) CHECK(values(t) == values(before.at(name).to(kBFloat16)));
  }
  CHECK_THROWS_WITH(net.to(kInt32), Catch::Contains("only accepts floating point dtypes") && Catch::Contains("int32"));
  CHECK(net.named_parameters().begin()->second.dtype() == kFloat32);
}
