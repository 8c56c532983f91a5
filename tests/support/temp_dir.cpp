#include "support/temp_dir.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace graft::test {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl =
      (fs::temp_directory_path() / ("graft-" + prefix + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "TempDir: mkdtemp '" + tmpl + "'");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, ec);
  fs::remove_all(path_, ec);
}

int TempDir::entries() const {
  int n = 0;
  for (auto it = fs::recursive_directory_iterator(path_); it != fs::recursive_directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace graft::test
