#include "data/idx_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <zlib.h>

#include "autograd/functional.h"
#include "runtime/error.h"

namespace graft::data {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  GRAFT_ERROR("IDX reader: '", path, "': ", what);
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
    if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a file");
    // gzopen reads gzip streams and, transparently, plain uncompressed files.
    f_.reset(gzopen(path.c_str(), "rb"));
    if (!f_) fail(path, "cannot open file");
    gzbuffer(f_.get(), 1 << 17);
  }
  // Reads up to n bytes; returns the count read (less than n only at the end of the stream).
  size_t read(void* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(f_.get(), static_cast<char*>(dst) + done, chunk);
      if (got < 0) error();
      if (got == 0) {
        check_clean_end();
        break;
      }
      done += static_cast<size_t>(got);
    }
    return done;
  }
  // True when the stream holds no more bytes.
  bool at_end() {
    char c;
    int got = gzread(f_.get(), &c, 1);
    if (got < 0) error();
    if (got == 0) check_clean_end();
    return got == 0;
  }

 private:
  [[noreturn]] void error() {
    int errnum = 0;
    const char* msg = gzerror(f_.get(), &errnum);
    fail(path_, std::string("corrupt or unreadable gzip data: ") + (msg ? msg : "unknown zlib error"));
  }
  // A gzip stream that ends before its trailer reports Z_BUF_ERROR on the final read.
  void check_clean_end() {
    int errnum = 0;
    const char* msg = gzerror(f_.get(), &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END)
      fail(path_, std::string("corrupt or truncated gzip data: ") + (msg ? msg : "unknown zlib error"));
  }
  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> f_;
};

uint32_t be32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path, uint32_t expected_magic) {
  GzReader in(path);
  unsigned char head[4];
  size_t got = in.read(head, 4);
  if (got < 4) fail(path, "file is too short for an IDX header (" + std::to_string(got) + " bytes)");
  IdxArray out;
  out.magic = be32(head);
  if (head[0] != 0 || head[1] != 0)
    fail(path, "bad magic number " + hex(out.magic) + ": not an IDX file (is it gzip-compressed twice, or HTML?)");
  if (head[2] != 0x08)
    fail(path, "unsupported IDX element type " + hex(head[2]) + " (magic " + hex(out.magic) +
                   "); only unsigned bytes (0x08) are supported");
  if (expected_magic != 0 && out.magic != expected_magic)
    fail(path, "bad magic number " + hex(out.magic) + ", expected " + hex(expected_magic) +
                   (expected_magic == kIdxImagesMagic ? " (an image file)" : expected_magic == kIdxLabelsMagic ? " (a label file)" : ""));
  const int ndims = head[3];
  if (ndims < 1 || ndims > 4) fail(path, "IDX header has " + std::to_string(ndims) + " dimensions (1 to 4 supported)");
  unsigned char dimbuf[16];
  got = in.read(dimbuf, 4 * static_cast<size_t>(ndims));
  if (got < 4 * static_cast<size_t>(ndims)) fail(path, "file ends inside the IDX dimension list");
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    uint32_t d = be32(dimbuf + 4 * i);
    if (d > static_cast<uint32_t>(INT32_MAX)) fail(path, "dimension " + std::to_string(d) + " is too large");
    out.dims.push_back(d);
    total *= d;  // at most 4 factors below 2^31, checked after each step
    if (total > kIdxMaxPayload) fail(path, "IDX dims describe more than " + std::to_string(kIdxMaxPayload) + " bytes");
  }
  // Grow the buffer geometrically as data arrives, so a lying header cannot make us allocate (and
  // zero) a huge block before finding out the payload is not there.
  uint64_t have = 0;
  while (have < total) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(total - have, std::max<uint64_t>(uint64_t{1} << 16, have)));
    out.data.resize(static_cast<size_t>(have + want));
    size_t n = in.read(out.data.data() + have, want);
    have += n;
    if (n < want) {
      out.data.resize(static_cast<size_t>(have));
      break;
    }
  }
  if (have < total)
    fail(path, "payload is truncated: the header dims need " + std::to_string(total) + " bytes but only " +
                   std::to_string(have) + " follow");
  if (!in.at_end()) fail(path, "payload is longer than the header dims say (" + std::to_string(total) + " bytes)");
  return out;
}

Tensor load_idx_images(const std::string& path) {
  IdxArray a = read_idx(path, kIdxImagesMagic);
  if (a.dims.size() != 3)
    fail(path, "an image file needs 3 dims [N, rows, cols], got " + std::to_string(a.dims.size()));
  Tensor t = graft::empty(a.dims, TensorOptions{}.dtype(kFloat32));
  float* p = t.data_ptr<float>();
  for (size_t i = 0; i < a.data.size(); ++i) p[i] = static_cast<float>(a.data[i]) / 255.0f;
  return t;
}

Tensor load_idx_labels(const std::string& path) {
  IdxArray a = read_idx(path, kIdxLabelsMagic);
  if (a.dims.size() != 1) fail(path, "a label file needs 1 dim [N], got " + std::to_string(a.dims.size()));
  Tensor t = graft::empty(a.dims, TensorOptions{}.dtype(kInt64));
  int64_t* p = t.data_ptr<int64_t>();
  for (size_t i = 0; i < a.data.size(); ++i) p[i] = a.data[i];
  return t;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  GRAFT_CHECK(f != nullptr, "write_gzip: cannot open '", path, "' for writing");
  size_t done = 0;
  while (done < bytes.size()) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1u << 30));
    int n = gzwrite(f, bytes.data() + done, chunk);
    if (n <= 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      GRAFT_ERROR("write_gzip: writing '", path, "' failed: ", msg);
    }
    done += static_cast<size_t>(n);
  }
  GRAFT_CHECK(gzclose(f) == Z_OK, "write_gzip: closing '", path, "' failed");
}

void write_idx(const std::string& path, const IdxArray& a, bool compress) {
  GRAFT_CHECK((a.magic & 0xffffff00u) == 0x00000800u, "write_idx: '", path, "': magic ", hex(a.magic),
              " is not an unsigned-byte IDX magic (0x000008NN)");
  GRAFT_CHECK((a.magic & 0xffu) == a.dims.size() && !a.dims.empty() && a.dims.size() <= 4, "write_idx: '", path,
              "': magic ", hex(a.magic), " does not match ", a.dims.size(), " dims (1 to 4 supported)");
  uint64_t total = 1;
  for (int64_t d : a.dims) {
    GRAFT_CHECK(d >= 0 && d <= INT32_MAX, "write_idx: '", path, "': bad dimension ", d);
    total *= static_cast<uint64_t>(d);
  }
  GRAFT_CHECK(total == a.data.size(), "write_idx: '", path, "': dims need ", total, " bytes but data holds ",
              a.data.size());
  std::string bytes;
  bytes.reserve(4 + 4 * a.dims.size() + a.data.size());
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>(v >> s));
  };
  put32(a.magic);
  for (int64_t d : a.dims) put32(static_cast<uint32_t>(d));
  bytes.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  if (compress) {
    write_gzip(path, bytes);
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  GRAFT_CHECK(f != nullptr, "write_idx: cannot open '", path, "' for writing");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  GRAFT_CHECK(std::fclose(f) == 0 && ok, "write_idx: writing '", path, "' failed");
}

}  // namespace graft::data
