#include <catch2/catch.hpp>

#include <filesystem>

#include "graft.h"
#include "data/fashion_mnist.h"
#include "data/idx_reader.h"
#include "support/error_message.h"
#include "support/fixtures.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::test;
using Catch::Matchers::Contains;

namespace {

std::string be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
}

std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = be32(magic);
  for (uint32_t d : dims) s += be32(d);
  return s + payload;
}

// Writes `bytes` gzip-compressed (graft's write_gzip: zlib's gzwrite; the tests do not link zlib).
void write_gz(const std::string& path, const std::string& bytes) { data::write_gzip(path, bytes); }

std::string pixels(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 37) % 256);
  return s;
}

}  // namespace

TEST_CASE("IDX images and labels load from gzip and from plain files") {
  TempDir dir("idx");
  const std::string img = dir.file("images.gz"), lbl = dir.file("labels");
  write_gz(img, idx_bytes(data::kIdxImagesMagic, {3, 2, 2}, std::string("\x00\xff\x80\x01", 4) + pixels(8)));
  write_file(lbl, idx_bytes(data::kIdxLabelsMagic, {3}, std::string("\x00\x09\x05", 3)));

  Tensor images = data::load_idx_images(img);
  CHECK(images.dtype() == kFloat32);
  CHECK(images.sizes() == Shape{3, 2, 2});
  auto v = images.to_vector<float>();
  CHECK(v[0] == 0.f);
  CHECK(v[1] == 1.f);
  CHECK(v[2] == Approx(128.0 / 255));
  CHECK(v[3] == Approx(1.0 / 255));

  Tensor labels = data::load_idx_labels(lbl);
  CHECK(labels.dtype() == kInt64);
  CHECK(labels.to_vector<int64_t>() == std::vector<int64_t>{0, 9, 5});

  data::IdxArray raw = data::read_idx(img);
  CHECK(raw.magic == data::kIdxImagesMagic);
  CHECK(raw.dims == std::vector<int64_t>{3, 2, 2});
  CHECK(raw.data.size() == 12);

  // write_idx round trip, compressed and plain; the gzip file starts with the gzip magic.
  for (bool compress : {true, false}) {
    const std::string out = dir.file(compress ? "copy.gz" : "copy");
    data::write_idx(out, raw, compress);
    CHECK((read_file(out).substr(0, 2) == "\x1f\x8b") == compress);
    data::IdxArray back = data::read_idx(out, data::kIdxImagesMagic);
    CHECK(back.dims == raw.dims);
    CHECK(back.data == raw.data);
  }
  data::IdxArray bad = raw;
  bad.data.pop_back();
  CHECK_THAT(error_message([&] { data::write_idx(dir.file("bad"), bad); }), Contains("dims need 12 bytes"));
  bad = raw;
  bad.magic = data::kIdxLabelsMagic;
  CHECK_THAT(error_message([&] { data::write_idx(dir.file("bad"), bad); }), Contains("does not match 3 dims"));
}

TEST_CASE("IDX reader errors name the file") {
  TempDir dir("idx");
  const std::string path = dir.file("broken-idx.gz");
  auto expect_error = [&](auto load, const std::string& needle) {
    INFO("expecting: " << needle);
    CHECK_THAT(error_message([&] { load(path); }), Contains(needle) && Contains(path));
  };
  auto images = [](const std::string& p) { return data::load_idx_images(p); };
  auto labels = [](const std::string& p) { return data::load_idx_labels(p); };

  SECTION("missing file") { expect_error(images, "no such file"); }
  SECTION("bad magic numbers") {
    write_gz(path, idx_bytes(0x12340803, {1, 1, 1}, "x"));
    expect_error(images, "bad magic number 0x12340803");
    write_gz(path, idx_bytes(0x00000d03, {1, 1, 1}, "xxxx"));
    expect_error(images, "unsupported IDX element type");
    write_gz(path, idx_bytes(data::kIdxLabelsMagic, {1}, "x"));
    expect_error(images, "expected 0x00000803");
    write_gz(path, idx_bytes(data::kIdxImagesMagic, {1, 1, 1}, "x"));
    expect_error(labels, "expected 0x00000801");
    write_gz(path, be32(0x00000800));
    CHECK_THAT(error_message([&] { data::read_idx(path); }), Contains("0 dimensions") && Contains(path));
  }
  SECTION("short header, truncated or overlong payload") {
    write_gz(path, std::string("\x00\x00", 2));
    expect_error(images, "too short");
    write_gz(path, be32(data::kIdxImagesMagic) + be32(5));
    expect_error(images, "ends inside the IDX dimension list");
    write_gz(path, idx_bytes(data::kIdxImagesMagic, {2, 2, 2}, pixels(7)));
    expect_error(images, "payload is truncated: the header dims need 8 bytes but only 7 follow");
    write_gz(path, idx_bytes(data::kIdxLabelsMagic, {2}, pixels(3)));
    expect_error(labels, "payload is longer");
    write_gz(path, idx_bytes(data::kIdxImagesMagic, {0x7fffffff, 0x7fffffff, 2}, ""));
    expect_error(images, "more than");
    write_file(path, idx_bytes(data::kIdxLabelsMagic, {100}, pixels(10)));  // plain file, truncated
    expect_error(labels, "truncated");
  }
  SECTION("a corrupt or cut gzip stream") {
    std::string full = idx_bytes(data::kIdxImagesMagic, {10, 28, 28}, pixels(7840));
    write_gz(path, full);
    std::string gz = read_file(path);
    write_file(path, gz.substr(0, gz.size() / 2));
    expect_error(images, "");
    gz[gz.size() / 2] ^= 0x55;
    gz[gz.size() / 2 + 1] ^= 0x55;
    write_file(path, gz);
    expect_error(images, "");
  }
}

TEST_CASE("FashionMnist checks its directory, files and counts") {
  TempDir dir("fmnist");
  SECTION("a missing directory tells how to get the data") {
    CHECK_THAT(error_message([&] { data::FashionMnist(dir.file("nothing-here")); }),
                         Contains("apt-get install dataset-fashion-mnist") && Contains("--data DIR") &&
                             Contains("nothing-here"));
  }
  SECTION("a missing file tells how to get the data") {
    CHECK_THAT(error_message([&] { data::FashionMnist(dir.path(), false); }),
                         Contains("t10k-images-idx3-ubyte.gz") && Contains("apt-get install dataset-fashion-mnist"));
  }
  SECTION("image and label counts must agree") {
    write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(data::kIdxImagesMagic, {3, 28, 28}, pixels(3 * 784)));
    write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(data::kIdxLabelsMagic, {2}, "\x01\x02"));
    CHECK_THAT(error_message([&] { data::FashionMnist(dir.path(), false); }),
                         Contains("3 images") && Contains("2 labels") && Contains("t10k-labels-idx1-ubyte.gz"));
  }
  SECTION("labels must be class indices") {
    write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_bytes(data::kIdxImagesMagic, {2, 28, 28}, pixels(2 * 784)));
    write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_bytes(data::kIdxLabelsMagic, {2}, "\x01\x0a"));
    CHECK_THROWS_WITH(data::FashionMnist(dir.path(), true), Contains("label 1 is 10"));
  }
  SECTION("a small valid split, the uncompressed label file accepted") {
    write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_bytes(data::kIdxImagesMagic, {2, 28, 28}, pixels(2 * 784)));
    write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes(data::kIdxLabelsMagic, {2}, "\x01\x09"));
    data::FashionMnist ds(dir.path(), true);
    CHECK(ds.size() == 2);
    CHECK(ds.images().sizes() == Shape{2, 1, 28, 28});
    CHECK(ds.labels().to_vector<int64_t>() == std::vector<int64_t>{1, 9});
    CHECK(data::FashionMnist::class_names().size() == 10);
    CHECK(data::FashionMnist::class_names()[9] == "Ankle boot");
  }
}

TEST_CASE("FashionMnist loads the installed test split") {
  const std::string root = data::FashionMnist::kDefaultRoot;
  if (!std::filesystem::is_directory(root)) {
    WARN("skipping: " << root << " is not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  data::FashionMnist test(root, false);
  REQUIRE(test.size() == 10000);
  CHECK(test.images().sizes() == Shape{10000, 1, 28, 28});
  CHECK(test.images().dtype() == kFloat32);
  CHECK(test.images().min().item<float>() >= 0.f);
  CHECK(test.images().max().item<float>() <= 1.f);
  CHECK(test.images().max().item<float>() > 0.5f);
  CHECK(test.labels().dtype() == kInt64);
  CHECK(test.labels().min().item<int64_t>() == 0);
  CHECK(test.labels().max().item<int64_t>() == 9);
  // The test split is balanced: 1000 of each class.
  auto l = test.labels().to_vector<int64_t>();
  std::vector<int> counts(10);
  for (int64_t c : l) counts[static_cast<size_t>(c)]++;
  CHECK(counts == std::vector<int>(10, 1000));
}
