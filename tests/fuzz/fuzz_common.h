#pragma once
// Shared by the libFuzzer targets: the loaders read files, so each input is written to one
// per-process temporary file (removed at exit) and the loader is called on its path.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace graft_fuzz {

inline const std::string& input_path() {
  static const std::string path = [] {
    char templ[] = "/tmp/graft_fuzz_XXXXXX";
    int fd = mkstemp(templ);
    if (fd < 0) std::abort();
    close(fd);
    static std::string p = templ;
    std::atexit([] { std::remove(p.c_str()); });
    return p;
  }();
  return path;
}

inline const std::string& write_input(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace graft_fuzz
