#pragma once
// Reading IDX files (the MNIST / Fashion-MNIST container), gzip-compressed or plain:
//
//   [0x00 0x00 type ndims][ndims x uint32 big-endian dims][payload: prod(dims) elements]
//
// Only unsigned-byte payloads (type 0x08) are supported, which is what (Fashion-)MNIST uses:
// magic 0x00000801 for label vectors, 0x00000803 for image stacks. Every failure (missing file,
// corrupt gzip stream, wrong magic, bad dims, payload shorter or longer than the dims say) is a
// graft::Error naming the file.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::data {

inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
// The largest payload accepted (bytes after decompression); guards against absurd headers.
inline constexpr uint64_t kIdxMaxPayload = uint64_t{1} << 32;

struct IdxArray {
  uint32_t magic = 0;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, prod(dims) bytes
};

// Reads any unsigned-byte IDX file; when `expected_magic` is non-zero the magic must equal it.
IdxArray read_idx(const std::string& path, uint32_t expected_magic = 0);

// An image file (magic 0x803, dims [N, rows, cols]) as float32 [N, rows, cols] scaled to [0, 1].
Tensor load_idx_images(const std::string& path);
// A label file (magic 0x801, dims [N]) as int64 [N].
Tensor load_idx_labels(const std::string& path);

// Writes an unsigned-byte IDX file (gzip-compressed with zlib when `compress`). Checks that the
// magic says unsigned bytes with dims.size() dimensions and that data holds prod(dims) bytes.
void write_idx(const std::string& path, const IdxArray& array, bool compress = true);
// Writes `bytes` to `path` gzip-compressed (zlib's gzwrite): any content, e.g. for tests.
void write_gzip(const std::string& path, const std::string& bytes);

}  // namespace graft::data
