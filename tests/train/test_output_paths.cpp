#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "graft.h"
#include "support/error_message.h"
#include "support/temp_dir.h"

using namespace graft;
using graft::test::error_message;
using graft::test::TempDir;

// check_output_path: a file that could be created or replaced now passes, and nothing is written;
// each refusal names the flag, the path and the part that is wrong.
TEST_CASE("output paths are checked before a run: missing, non-directory and unwritable parts are named") {
  TempDir dir("output-paths");
  train::check_output_path("--save", dir.file("w.safetensors"));
  CHECK(dir.entries() == 0);  // nothing created
  std::ofstream(dir.file("old.csv")) << "x\n";
  train::check_output_path("--metrics", dir.file("old.csv"));  // replacing an existing file

  std::string e = error_message([&] { train::check_output_path("--save", dir.file("runs/today/w.safetensors")); });
  CHECK(e.find("--save") != std::string::npos);
  CHECK(e.find(dir.file("runs/today/w.safetensors")) != std::string::npos);
  CHECK(e.find("directory '" + dir.file("runs") + "' does not exist") != std::string::npos);

  e = error_message([&] { train::check_output_path("--plot", dir.file("old.csv/chart.svg")); });
  CHECK(e.find("--plot") != std::string::npos);
  CHECK(e.find("is not a directory") != std::string::npos);

  e = error_message([&] { train::check_output_path("--graph", dir.path()); });
  CHECK(e.find("is a directory; expected a file name") != std::string::npos);
  train::check_output_path("--run-dir", dir.path(), /*directory_ok=*/true);

  e = error_message([&] { train::check_output_paths({{"--save", ""}, {"--memory-timeline", dir.file("no/t.svg")}}); });
  CHECK(e.find("--memory-timeline") != std::string::npos);

  // Write permission is what the process has: root writes anywhere, so only check as a user.
  if (geteuid() != 0) {
    REQUIRE(chmod(dir.path().c_str(), 0500) == 0);
    e = error_message([&] { train::check_output_path("--save", dir.file("w.safetensors")); });
    CHECK(e.find("is not writable") != std::string::npos);
    chmod(dir.path().c_str(), 0700);
  }
}
