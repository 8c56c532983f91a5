#pragma once
// A fresh directory for one test, removed with everything in it when the object dies, also after
// the test made it read-only. mkdtemp makes the name unique, so tests running in parallel (and the
// cases of one test) never share a directory; the prefix and the process id say whose it is.
#include <string>

namespace graft::test {

class TempDir {
 public:
  // Under $TMPDIR (else /tmp): "graft-<prefix>-<pid>-XXXXXX".
  explicit TempDir(const std::string& prefix = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name; creates nothing.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // How many files and directories are below path(), at any depth.
  int entries() const;

 private:
  std::string path_;
};

}  // namespace graft::test
