#pragma once
// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian uint64][N bytes: JSON header, space-padded to a multiple of 8][data]
//
// The header maps each tensor name to {"dtype": "F32"|"F64"|"I64"|"BOOL", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the start of the data section) and may hold a
// "__metadata__" object of string -> string. Tensors are written contiguously in sorted-name order.
//
// Loading validates the whole file before trusting any of it: every problem (truncated file, bad
// JSON, unknown dtype, shape/size mismatch, offsets that overlap, leave gaps or run past the data)
// is a graft::Error naming the file and the problem; no input makes the loader read out of bounds.
#include <map>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::nn {

// Saves tensors from any device and layout (each is copied to contiguous CPU memory first).
// Writes to a temporary file next to `path` and renames it, so a failed save never leaves a
// half-written file under `path`.
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// A file's parts before they are written, for writers that checksum or stream the bytes
// themselves (train/checkpoint_file.h): the header's JSON text (unpadded, as nlohmann dumps it) and
// the tensors as contiguous CPU tensors in data-section order. The file is the 8-byte length of the
// header padded with spaces to a multiple of 8, that padded header, then each tensor's bytes.
struct SafetensorsParts {
  std::string header;
  std::vector<Tensor> data;
};
SafetensorsParts encode_safetensors(const std::map<std::string, Tensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {},
                                    const std::string& path_for_errors = "");

// Loads every tensor as a contiguous CPU tensor.
std::map<std::string, Tensor> load_safetensors(const std::string& path);
// Same, also returning the "__metadata__" entries (empty when the file has none).
std::map<std::string, Tensor> load_safetensors(const std::string& path, std::map<std::string, std::string>& metadata);

// The largest header accepted on load (as the reference implementation: 100 MB).
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

}  // namespace graft::nn
