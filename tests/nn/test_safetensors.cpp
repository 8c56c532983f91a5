#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "graft.h"
#include "nn/safetensors.h"
#include "support/error_message.h"
#include "support/fixtures.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::test;
using Catch::Matchers::Contains;

namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

template <class T>
std::string raw(std::initializer_list<T> vals) {
  std::string s;
  for (T v : vals) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

// A safetensors file from a header text (padded to 8 like the reference writer) and data bytes.
std::string st_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

}  // namespace

TEST_CASE("safetensors round trip keeps dtypes, shapes and values") {
  TempDir dir("safetensors");
  std::map<std::string, Tensor> in;
  in["f32"] = tensor(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 1e-7f, 42.f}, {2, 3});
  in["f64"] = tensor(std::vector<double>{3.141592653589793, -1e300, 2.5, 0.1}, {4}, dtype(kFloat64));
  in["i64"] = tensor(std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX}, {2, 2, 1});
  in["bool"] = tensor(std::vector<bool>{true, false, true}, {3});
  in["scalar"] = scalar_tensor(7.5);
  in["empty"] = zeros({0, 3});
  in["grad_leaf"] = tensor({1, 2, 3}).requires_grad_();
  const std::string path = dir.file("model.safetensors");
  nn::save_safetensors(in, path, {{"format", "pt"}, {"epoch", "3"}});
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  std::map<std::string, std::string> meta;
  auto out = nn::load_safetensors(path, meta);
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}, {"epoch", "3"}});
  REQUIRE(out.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    REQUIRE(out.count(name) == 1);
    const Tensor& u = out.at(name);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.sizes() == t.sizes());
    CHECK(u.is_cpu());
    CHECK(u.is_contiguous());
    CHECK_FALSE(u.requires_grad());
  }
  CHECK(out["f32"].to_vector<float>() == in["f32"].to_vector<float>());
  CHECK(out["f64"].to_vector<double>() == in["f64"].to_vector<double>());
  CHECK(out["i64"].to_vector<int64_t>() == in["i64"].to_vector<int64_t>());
  CHECK(out["bool"].to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(out["scalar"].dim() == 0);
  CHECK(out["scalar"].item<float>() == 7.5f);
  CHECK(out["empty"].numel() == 0);
  CHECK(out["grad_leaf"].to_vector<float>() == std::vector<float>{1, 2, 3});

  // The loader without the metadata overload gives the same tensors.
  CHECK(nn::load_safetensors(path).size() == in.size());
}

TEST_CASE("safetensors saves non-contiguous views as their logical values") {
  TempDir dir("safetensors");
  Tensor base = arange(12, dtype(kFloat32)).view({3, 4});
  Tensor t = base.t();                          // [4, 3], transposed strides
  Tensor s = base.slice(1, 0, 4, 2);            // [3, 2], stepped
  Tensor e = tensor({5}).expand({2, 3});        // stride 0
  REQUIRE_FALSE(t.is_contiguous());
  const std::string path = dir.file("views.safetensors");
  nn::save_safetensors({{"t", t}, {"s", s}, {"e", e}}, path);
  auto out = nn::load_safetensors(path);
  CHECK(out["t"].sizes() == Shape{4, 3});
  CHECK(out["t"].to_vector<float>() == t.contiguous().to_vector<float>());
  CHECK(out["s"].to_vector<float>() == std::vector<float>{0, 2, 4, 6, 8, 10});
  CHECK(out["e"].to_vector<float>() == std::vector<float>(6, 5.f));
}

TEST_CASE("safetensors writes the reference layout byte for byte") {
  TempDir dir("safetensors");
  const std::string path = dir.file("golden.safetensors");
  nn::save_safetensors({{"b", tensor(std::vector<int64_t>{7}, {})}, {"a", tensor({1.5, -2})}}, path);
  // Sorted names, data laid out in that order, header padded with spaces to a multiple of 8.
  const std::string header =
      R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},"b":{"data_offsets":[8,16],"dtype":"I64","shape":[]}})";
  const std::string expected = st_file(header, raw<float>({1.5f, -2.f}) + raw<int64_t>({7}));
  const std::string got = read_file(path);
  CHECK(got.size() % 8 == 0);
  CHECK(got == expected);
}

TEST_CASE("safetensors loads a hand-built golden file") {
  TempDir dir("safetensors");
  const std::string path = dir.file("hand.safetensors");
  // Entries in any key order, offsets out of name order, metadata first, extra spaces.
  const std::string header =
      R"({"__metadata__": {"source": "hand"}, "z": {"shape": [2, 2], "dtype": "F64", "data_offsets": [3, 35]},)"
      R"( "flags": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]},)"
      R"( "none": {"dtype": "F32", "shape": [0], "data_offsets": [35, 35]}})";
  std::string data = std::string("\x01\x00\x02", 3) + raw<double>({1, 2, 3, -4});
  write_file(path, st_file(header, data));
  std::map<std::string, std::string> meta;
  auto out = nn::load_safetensors(path, meta);
  CHECK(meta.at("source") == "hand");
  REQUIRE(out.size() == 3);
  CHECK(out["z"].dtype() == kFloat64);
  CHECK(out["z"].sizes() == Shape{2, 2});
  CHECK(out["z"].to_vector<double>() == std::vector<double>{1, 2, 3, -4});
  CHECK(out["flags"].to_vector<bool>() == std::vector<bool>{true, false, true});  // non-zero bytes are true
  CHECK(out["none"].numel() == 0);
}

TEST_CASE("safetensors rejects malformed files with errors naming the file and the problem") {
  TempDir dir("safetensors");
  const std::string path = dir.file("bad.safetensors");
  auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    write_file(path, bytes);
    INFO("expecting: " << needle);
    CHECK_THAT(error_message([&] { nn::load_safetensors(path); }), Contains(needle) && Contains(path));
  };
  const std::string f32x2 = raw<float>({1, 2});

  SECTION("truncated or absurd header lengths") {
    expect_error("", "shorter than the 8-byte");
    expect_error(std::string("\x10\x00\x00", 3), "shorter than the 8-byte");
    expect_error(le64(64) + "{}", "runs past the end of the file");
    expect_error(le64(uint64_t{1} << 40) + "{}", "absurdly large");
    expect_error(le64(UINT64_MAX) + "{}", "absurdly large");
  }
  SECTION("bad JSON and non-object entries") {
    expect_error(st_file("{\"a\": ", ""), "not valid JSON");
    expect_error(le64(0), "not valid JSON");
    expect_error(st_file("[1, 2]", ""), "must be a JSON object");
    expect_error(st_file(R"({"a": 5})", ""), "not a JSON object");
    expect_error(st_file(R"({"a": [1]})", ""), "not a JSON object");
    expect_error(st_file(R"({"__metadata__": [1]})", ""), "\"__metadata__\" must be an object");
    expect_error(st_file(R"({"__metadata__": {"k": 1}})", ""), "is not a string");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                         R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                         f32x2),
                 "names 'a' twice");
  }
  SECTION("dtypes, shapes and offsets") {
    expect_error(st_file(R"({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 4]}})", raw<float>({1})),
                 "unknown dtype \"F8_E4M3\"");
    expect_error(st_file(R"({"a": {"dtype": 3, "shape": [2], "data_offsets": [0, 8]}})", f32x2), "\"dtype\"");
    expect_error(st_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", f32x2), "\"shape\"");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [2]}})", f32x2), "data_offsets");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", f32x2), "data_offsets");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, -8]}})", f32x2),
                 "non-negative");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", f32x2),
                 "negative dimension -2");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 8]}})", f32x2),
                 "non-integer");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", f32x2),
                 "needs 12 bytes");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [[[[2]]]], "data_offsets": [0, 8]}})", f32x2),
                 "non-integer");
    std::string ones = "1";
    for (int i = 0; i < 64; ++i) ones += ",1";
    expect_error(st_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 4], "shape": [)" + ones + "]}}", raw<float>({1})),
                 "shape has 65 dimensions");
    // Deeply nested JSON neither overflows the stack when parsed, reported or destroyed.
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    expect_error(st_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 8], "shape": [)" + deep + "]}}", f32x2),
                 "non-integer");
    expect_error(st_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 8], "shape": )" + std::string(100000, '['), f32x2),
                 "not valid JSON");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
                         f32x2),
                 "too large");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", f32x2),
                 "past the end of the data section");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", f32x2),
                 "end before begin");
  }
  SECTION("the tensors must tile the data section exactly") {
    const std::string data12 = raw<float>({1, 2, 3});
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                         R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                         data12),
                 "overlap");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                         R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                         data12),
                 "gap in the data section");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", f32x2),
                 "gap in the data section");
    expect_error(st_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", f32x2),
                 "cover 4 bytes but the data section holds 8");
  }
  SECTION("a missing file") {
    CHECK_THAT(error_message([&] { nn::load_safetensors(dir.file("nope.safetensors")); }),
                         Contains("cannot open") && Contains("nope.safetensors"));
  }
}

TEST_CASE("save_safetensors rejects reserved names and undefined tensors, leaving no file") {
  TempDir dir("safetensors");
  const std::string path = dir.file("x.safetensors");
  CHECK_THROWS_WITH(nn::save_safetensors({{"__metadata__", tensor({1})}}, path), Contains("reserved"));
  CHECK_THROWS_WITH(nn::save_safetensors({{"w", Tensor()}}, path), Contains("'w' is undefined"));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_THROWS_WITH(nn::save_safetensors({{"w", tensor({1})}}, dir.file("no/such/dir/x.safetensors")),
                    Contains("cannot open"));
}

namespace {

// A tensor's bytes, for exact comparisons of every dtype (NaN payloads included).
std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A tensor of `dtype` and `shape` holding `bytes` as they are.
Tensor from_bytes(const std::string& bytes, const Shape& shape, DType dtype) {
  Tensor t = ops::empty(shape, dtype);
  REQUIRE(t.nbytes() == bytes.size());
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

}  // namespace

TEST_CASE("safetensors round trips BF16, F16, U8 and I32 byte for byte") {
  TempDir dir("safetensors_dtypes");
  std::map<std::string, Tensor> in;
  // Every 16-bit pattern (NaNs, infinities and subnormals among them): the file must keep them all.
  std::string all16;
  for (uint32_t v = 0; v < 65536; ++v) all16 += raw<uint16_t>({static_cast<uint16_t>(v)});
  in["bf16"] = from_bytes(all16, {256, 256}, kBFloat16);
  in["f16"] = from_bytes(all16, {65536}, kFloat16);
  std::string all8;
  for (int v = 0; v < 256; ++v) all8 += static_cast<char>(v);
  in["u8"] = from_bytes(all8, {16, 16}, kUInt8);
  in["i32"] = from_bytes(raw<int32_t>({INT32_MIN, -1, 0, 1, INT32_MAX, 123456789}), {3, 2}, kInt32);
  in["bf16_view"] = randn({4, 6}).to(kBFloat16).t();  // non-contiguous: saved as its logical values
  in["u8_odd"] = from_bytes(raw<uint8_t>({7, 8, 9}), {3}, kUInt8);  // leaves the next tensor misaligned
  const std::string path = dir.file("dtypes.safetensors");
  nn::save_safetensors(in, path);

  // The header names the safetensors dtype codes.
  const std::string file = read_file(path);
  for (const char* code : {"\"BF16\"", "\"F16\"", "\"U8\"", "\"I32\""}) CHECK(file.find(code) != std::string::npos);

  auto out = nn::load_safetensors(path);
  REQUIRE(out.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    REQUIRE(out.count(name) == 1);
    CHECK(out.at(name).dtype() == t.dtype());
    CHECK(out.at(name).sizes() == t.sizes());
    CHECK(bytes_of(out.at(name)) == bytes_of(t));
  }
}

TEST_CASE("a safetensors file written by PyTorch with bf16, f16, u8, i32 and f32 tensors loads exactly") {
  // torch_mixed_dtypes.json: each tensor's dtype, shape and exact values (make_torch_dtypes_safetensors.py).
  // The file's u8 data starts at byte 60 of the data section, not a multiple of 8.
  const auto want = nlohmann::json::parse(read_file(fixture_path("torch_mixed_dtypes.json"))).at("tensors");
  std::map<std::string, std::string> meta;
  auto got = nn::load_safetensors(fixture_path("torch_mixed_dtypes.safetensors"), meta);
  CHECK(meta.count("torch_version") == 1);
  REQUIRE(got.size() == want.size());
  for (const auto& [name, w] : want.items()) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    const Tensor& t = got.at(name);
    CHECK(dtype_name(t.dtype()) == w.at("dtype").get<std::string>());
    CHECK(t.sizes() == w.at("shape").get<std::vector<int64_t>>());
    // Every value of these dtypes is exact in a double, so the comparison is exact.
    CHECK(t.to(kFloat64).to_vector<double>() == w.at("values").get<std::vector<double>>());
  }
  // The 16-bit tensors are usable as they are: arithmetic in their own dtype.
  Tensor doubled = got.at("w_bf16") * 2;
  CHECK(doubled.dtype() == kBFloat16);
  CHECK(doubled.to(kFloat64).to_vector<double>()[0] == 2 * want.at("w_bf16").at("values")[0].get<double>());
}
