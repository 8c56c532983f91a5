#include "train/output_paths.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "runtime/error.h"

namespace graft::train {

namespace fs = std::filesystem;

void check_output_path(const std::string& flag, const std::string& path, bool directory_ok) {
  GRAFT_CHECK(!path.empty(), flag, ": expected a path, got an empty one");
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) {
      GRAFT_CHECK(directory_ok, flag, " ", path, ": is a directory; expected a file name");
      GRAFT_CHECK(access(path.c_str(), W_OK | X_OK) == 0, flag, " ", path,
                  ": the directory is not writable by this process");
      return;
    }
    GRAFT_CHECK(fs::is_regular_file(st), flag, " ", path, ": exists and is not a regular file");
    GRAFT_CHECK(access(path.c_str(), W_OK) == 0, flag, " ", path, ": the file exists and is not writable");
    return;
  }
  // The file will be created: its directory must exist and take new entries.
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  const fs::file_status ds = fs::status(dir, ec);
  if (!fs::exists(ds)) {
    // Name the first missing part, so "runs/today/w.safetensors" says whether runs/ exists.
    fs::path missing = dir;
    while (missing.has_parent_path() && missing.parent_path() != missing && !fs::exists(missing.parent_path(), ec))
      missing = missing.parent_path();
    GRAFT_ERROR(flag, " ", path, ": directory '", missing.string(), "' does not exist (create it first)");
  }
  GRAFT_CHECK(fs::is_directory(ds), flag, " ", path, ": '", dir.string(), "' is not a directory");
  GRAFT_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, flag, " ", path, ": directory '", dir.string(),
              "' is not writable by this process");
}

void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [flag, path] : outputs)
    if (!path.empty()) check_output_path(flag, path);
}

}  // namespace graft::train
