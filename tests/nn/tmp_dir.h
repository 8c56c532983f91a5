#pragma once
// A unique temporary directory under /tmp, removed with everything in it when the object dies.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace graft_test {

class TmpDir {
 public:
  explicit TmpDir(const std::string& prefix = "graft_nn_test") {
    std::string templ = "/tmp/" + prefix + "_XXXXXX";
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace graft_test

#include "runtime/error.h"

namespace graft_test {
// The what() of the graft::Error that f() throws, or a marker saying what happened instead.
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const graft::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a graft::Error: ") + e.what() + ">";
  }
  return "<no exception thrown>";
}
}  // namespace graft_test
