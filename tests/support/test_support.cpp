// The test harness itself (tests/support/): every other test's assertions go through it, so a
// check_close that passed everything, or a runner that missed an exit code, would weaken them all.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <limits>
#include <string>

#include "graft.h"
#include "data/idx_reader.h"
#include "support/check_close.h"
#include "support/fixtures.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
Tensor f64(const std::vector<double>& v, const Shape& s) { return graft::tensor(v, s, dtype(kFloat64)); }
}  // namespace

TEST_CASE("check_close passes within max(atol, rtol * |expected|) and names the worst element otherwise") {
  const Tolerance tenth{.rtol = 0.1, .atol = 0.1};
  CHECK(close_mismatch(f64({1.09, 20}, {2}), {1.0, 21.9}, tenth).empty());
  // The larger of the two bounds, not their sum: 0.15 is beyond both 0.1 and 0.1 * 1.
  CHECK_THAT(close_mismatch(f64({1.15}, {1}), {1.0}, tenth), Contains("1 of 1 elements"));
  const std::string m = close_mismatch(f64({0, 1, 2, 3, 9, 5}, {2, 3}), f64({0, 1, 2, 3.5, 4, 5}, {2, 3}), tenth);
  CHECK_THAT(m, Contains("2 of 6 elements"));
  CHECK_THAT(m, Contains("worst at [1, 1] (element 4): actual 9, expected 4"));
  CHECK_THAT(m, Contains("float64 [2, 3]"));
  // Values, not layout: a transposed view equals its contiguous copy.
  Tensor t = f64({1, 2, 3, 4, 5, 6}, {2, 3}).t();
  CHECK(close_mismatch(t, t.contiguous(), Tolerance::exact()).empty());
}

TEST_CASE("check_close compares shapes and dtypes unless told to read values") {
  CHECK_THAT(close_mismatch(f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({1, 2, 3, 4, 5, 6}, {3, 2})),
             Contains("the shapes differ"));
  CHECK_THAT(close_mismatch(f64({1, 2}, {2}), {1, 2, 3}), Contains("the numbers of elements differ"));
  Tensor x32 = graft::tensor({0.5, 0.25});
  CHECK_THAT(close_mismatch(x32, f64({0.5, 0.25}, {2})), Contains("the dtypes differ"));
  CHECK(close_mismatch(x32, f64({0.5, 0.25}, {2}), {.check_dtype = false}).empty());
  CHECK(close_mismatch(x32, {0.5, 0.25}).empty());  // a reference in values is float64 by nature
  CHECK_THAT(close_mismatch(Tensor(), {1.0}), Contains("actual is an undefined tensor"));
}

TEST_CASE("check_close's default tolerance follows the dtype") {
  CHECK(default_tolerance(kFloat64).rtol == 1e-7);
  CHECK(default_tolerance(kFloat32).atol == 1e-5);
  CHECK(default_tolerance(kInt64).rtol == 0.0);
  CHECK_FALSE(close_mismatch(f64({1 + 1e-6}, {1}), f64({1}, {1})).empty());
  CHECK(close_mismatch(graft::tensor({1 + 1e-6}), graft::tensor({1.0})).empty());
  // A float32 result against a float64 reference takes float32's defaults.
  CHECK(close_mismatch(graft::tensor({1 + 1e-6}), f64({1}, {1}), {.check_dtype = false}).empty());
  CHECK_FALSE(close_mismatch(graft::tensor(std::vector<int64_t>{3}, {1}), {3.5}).empty());
}

TEST_CASE("check_close matches infinities exactly and NaN only with equal_nan") {
  CHECK(close_mismatch(f64({kInf, -kInf}, {2}), {kInf, -kInf}).empty());
  CHECK_FALSE(close_mismatch(f64({kInf}, {1}), {-kInf}).empty());
  CHECK_FALSE(close_mismatch(f64({1e300}, {1}), {kInf}, {.rtol = 1, .atol = 1}).empty());
  CHECK_FALSE(close_mismatch(f64({kNaN}, {1}), {kNaN}).empty());
  CHECK(close_mismatch(f64({kNaN}, {1}), {kNaN}, {.equal_nan = true}).empty());
  CHECK_FALSE(close_mismatch(f64({kNaN}, {1}), {1.0}, {.equal_nan = true}).empty());
  CHECK_FALSE(close_mismatch(f64({1.0}, {1}), {kNaN}, {.equal_nan = true}).empty());
}

TEST_CASE("a check_close that does not hold fails the test case", "[!shouldfail]") {
  check_close(f64({1, 2}, {2}), {1, 3});
}

TEST_CASE("TempDir makes a fresh directory per object and removes it, also when read-only") {
  std::string kept;
  {
    TempDir a("support"), b("support");
    CHECK(a.path() != b.path());
    CHECK(fs::is_directory(a.path()));
    CHECK_THAT(a.path(), Contains("graft-support-"));
    write_file(a.file("x"), "bytes");
    fs::create_directory(a.file("sub"));
    CHECK(a.entries() == 2);
    CHECK(read_file(a.file("x")) == "bytes");
    fs::permissions(a.path(), fs::perms::owner_read | fs::perms::owner_exec);
    kept = a.path();
  }
  CHECK_FALSE(fs::exists(kept));
  CHECK_THROWS_WITH(read_file(kept + "/x"), Contains("cannot open"));
}

TEST_CASE("run_process captures stdout, stderr and the exit code") {
  ProcessResult r = run_process("echo out; echo err >&2; exit 3");
  CHECK(r.exit_code == 3);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK_FALSE(r.timed_out);
  r = run_process("echo out; echo err >&2", {.merge_stderr = true});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "out\nerr\n");
  CHECK(r.err.empty());
  CHECK(run_process("kill -9 $$").exit_code == 128 + 9);
}

TEST_CASE("run_process kills a child that overruns its time and fails the test", "[!shouldfail]") {
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = run_process("sleep 30", {.timeout_s = 0.3});
  CHECK(r.timed_out);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("the fixture readers find the committed data and write the synthetic data set") {
  CHECK(fs::exists(fixture_path("transformer_fixture.safetensors")));
  const auto& f = safetensors_fixture("transformer_fixture.safetensors");
  CHECK(&f == &safetensors_fixture("transformer_fixture.safetensors"));  // read once
  CHECK(f.count("sdpa.q") == 1);
  TempDir dir("support");
  write_square_data_set(dir.path(), 12, 3);
  CHECK(data::load_idx_labels(dir.file("t10k-labels-idx1-ubyte.gz")).sizes() == Shape{3});
  Tensor images = data::load_idx_images(dir.file("train-images-idx3-ubyte.gz"));
  CHECK(images.sizes() == Shape{12, 28, 28});
  CHECK(data::load_idx_labels(dir.file("train-labels-idx1-ubyte.gz")).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
  CHECK(images.select(0, 11).select(0, 3).select(0, 7).item<float>() == 1.0f);  // class 1's square
}
