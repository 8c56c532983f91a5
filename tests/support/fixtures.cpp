#include "support/fixtures.h"

#include <fstream>
#include <utility>
#include <iterator>
#include <stdexcept>

#include "data/idx_reader.h"
#include "nn/safetensors.h"

namespace graft::test {

std::string fixture_path(const std::string& name) { return std::string(GRAFT_TEST_DATA_DIR) + "/" + name; }
// GRAFT_TEST_DATA_DIR is tests/nn/data.
std::string tests_path(const std::string& relative) { return std::string(GRAFT_TEST_DATA_DIR) + "/../../" + relative; }

const std::map<std::string, Tensor>& safetensors_fixture(const std::string& name) {
  static std::map<std::string, std::map<std::string, Tensor>> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, nn::load_safetensors(fixture_path(name))).first;
  return it->second;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("read_file: cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("write_file: cannot write " + path);
}

void write_square_data_set(const std::string& dir, int n_train, int n_test, int noise,
                           const std::function<int(int)>& label) {
  for (auto [prefix, n] : {std::pair<std::string, int>{"train", n_train}, {"t10k", n_test}}) {
    data::IdxArray images{data::kIdxImagesMagic, {n, 28, 28}, {}}, labels{data::kIdxLabelsMagic, {n}, {}};
    for (int i = 0; i < n; ++i) {
      const int c = label ? label(i) : i % 10;
      labels.data.push_back(static_cast<uint8_t>(c));
      const int r0 = (c / 4) * 7 + 3, c0 = (c % 4) * 7;
      for (int r = 0; r < 28; ++r)
        for (int q = 0; q < 28; ++q)
          images.data.push_back(r >= r0 && r < r0 + 7 && q >= c0 && q < c0 + 7 ? 255 : (i * 7 + r * q) % noise);
    }
    data::write_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", images);
    data::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels);
  }
}

}  // namespace graft::test
