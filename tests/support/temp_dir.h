#pragma once
// Test helper: a fresh directory under /tmp (mkdtemp, whose template must end in XXXXXX), removed
// with everything in it at the end of the test, also after a test made it read-only.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace graft::test {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/graft-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Every file and directory below `path`.
  int entries() const {
    int n = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(path);
         it != std::filesystem::recursive_directory_iterator(); ++it)
      ++n;
    return n;
  }
};

}  // namespace graft::test
