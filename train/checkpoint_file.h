#pragma once
// One training checkpoint as one file, written so that a kill at any instant leaves either the old
// file or the new one under the final name, never a mixture.
//
// The file is a safetensors file (nn/safetensors.h), so any safetensors reader opens its tensors.
// Its "__metadata__" holds:
//   "graft.format": "graft-run-checkpoint/1"
//   "graft.state":  the run's state as JSON text (train/run_state.h)
//   "graft.crc32":  8 hex digits: zlib's crc32 of the header's JSON with this one key removed (as
//                   nlohmann dumps it: keys sorted, no spaces) followed by the whole data section.
//
// Invariants:
// 1. write_checkpoint_file writes `path`.tmp in the same directory, fsyncs it, renames it over
//    `path` and fsyncs the directory. Until the rename `path` is the previous file (or absent);
//    after the directory's fsync the new file survives a power cut. On any failure (a full disk,
//    a directory that is gone or read-only) the .tmp file is removed and the graft::Error names
//    the directory and the system's reason; `path` is untouched.
// 2. read_checkpoint_file accepts a file only when its length, header, checksum and tensor table
//    all agree, so a truncated file, a flipped byte anywhere (header or data) or a file from
//    elsewhere is an Error naming the file and what is wrong. It never reads out of bounds.
// 3. The checksum covers every byte that carries meaning: the header's JSON (names, dtypes, shapes,
//    offsets, metadata) in its canonical dump, and the data. Only the header's space padding is
//    outside it.
// 4. Test hook: GRAFT_TEST_KILL_BEFORE_RENAME=k makes the k-th checkpoint this process writes raise
//    SIGKILL after the .tmp file is written and synced, before the rename (the kill test uses it to
//    hit that window every time).
#include <map>
#include <string>

#include "runtime/tensor.h"

namespace graft::train {

inline constexpr const char* kCheckpointFormat = "graft-run-checkpoint/1";

struct CheckpointContents {
  std::map<std::string, Tensor> tensors;  // contiguous CPU tensors
  std::string state;                      // the "graft.state" JSON text
  uint64_t bytes = 0;                     // the file's size
};

// Invariant 1. Returns the bytes written.
uint64_t write_checkpoint_file(const std::string& path, const std::map<std::string, Tensor>& tensors,
                               const std::string& state);
// Invariant 2.
CheckpointContents read_checkpoint_file(const std::string& path);

}  // namespace graft::train
