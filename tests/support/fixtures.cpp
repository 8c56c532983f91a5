#include "support/fixtures.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "nn/safetensors.h"

namespace graft::test {

std::string fixture_path(const std::string& name) { return std::string(GRAFT_TEST_DATA_DIR) + "/" + name; }

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

}  // namespace graft::test
