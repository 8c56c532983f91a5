#pragma once
// Output paths checked before a run starts, so a typo in --save or a missing directory fails in the
// first second instead of after the whole run (its weights then lost).
//
// Invariants:
// 1. check_output_path(flag, path) passes exactly when the file could be created or replaced now:
//    its directory exists, is a directory and is writable and searchable by this process, and the
//    path itself, if present, is a writable regular file (or, with directory_ok, a writable
//    directory: --run-dir). It creates and writes nothing.
// 2. A refusal is a graft::Error naming the flag, the path and what is wrong with it (which part
//    of it is missing, is not a directory, or is not writable).
#include <string>
#include <utility>
#include <vector>

namespace graft::train {

void check_output_path(const std::string& flag, const std::string& path, bool directory_ok = false);
// Every (flag, path) pair with a non-empty path; the first bad one throws.
void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace graft::train
