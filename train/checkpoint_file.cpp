#include "train/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "nn/safetensors.h"
#include "runtime/error.h"

namespace graft::train {

namespace {

using nlohmann::json;
constexpr const char* kCrcKey = "graft.crc32";

uint32_t crc_update(uint32_t crc, const void* data, uint64_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes a uInt length: feed it in 1 GiB pieces
    const uInt piece = static_cast<uInt>(std::min<uint64_t>(n, uint64_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, piece));
    p += piece;
    n -= piece;
  }
  return crc;
}

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string directory_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// A write that fails part-way: close and remove the .tmp, then name the directory and the reason.
class TmpFile {
 public:
  TmpFile(std::string tmp, std::string dir) : tmp_(std::move(tmp)), dir_(std::move(dir)) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create '" + tmp_ + "'");
  }
  ~TmpFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  void write(const void* data, uint64_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min<uint64_t>(n, uint64_t{1} << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("writing '" + tmp_ + "' failed");
      p += w;
      n -= static_cast<uint64_t>(w);
    }
  }
  void sync_and_close() {
    if (::fsync(fd_) != 0) fail("fsync of '" + tmp_ + "' failed");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("closing '" + tmp_ + "' failed");
  }
  void rename_to(const std::string& path) {
    if (::rename(tmp_.c_str(), path.c_str()) != 0) fail("cannot rename '" + tmp_ + "' to '" + path + "'");
    committed_ = true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const std::string reason = errno != 0 ? std::strerror(errno) : "unknown error";
    GRAFT_ERROR("checkpoint: cannot save in directory '", dir_, "': ", what, ": ", reason);
  }

 private:
  std::string tmp_, dir_;
  int fd_ = -1;
  bool committed_ = false;
};

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) GRAFT_ERROR("checkpoint: cannot open directory '", dir, "' to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) GRAFT_ERROR("checkpoint: fsync of directory '", dir, "' failed: ", std::strerror(err));
}

// Invariant 4: the test hook's countdown, read once.
bool kill_before_this_rename() {
  static std::atomic<long> writes{0};
  const char* v = std::getenv("GRAFT_TEST_KILL_BEFORE_RENAME");
  const long target = v ? std::atol(v) : 0L;
  return target > 0 && ++writes == target;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  GRAFT_ERROR("checkpoint '", path, "' is not usable: ", what);
}

}  // namespace

uint64_t write_checkpoint_file(const std::string& path, const std::map<std::string, Tensor>& tensors,
                               const std::string& state) {
  std::map<std::string, std::string> metadata{{"graft.format", kCheckpointFormat}, {"graft.state", state}};
  nn::SafetensorsParts parts = nn::encode_safetensors(tensors, metadata, path);
  // The checksum is over the header without its own key (invariant 3): hash that dump, then add
  // the key and dump again; the reader removes it and gets the first dump back.
  uint32_t crc = crc_update(static_cast<uint32_t>(crc32(0, Z_NULL, 0)), parts.header.data(), parts.header.size());
  for (const Tensor& t : parts.data) crc = crc_update(crc, t.data_ptr(), t.nbytes());
  json header = json::parse(parts.header);
  header["__metadata__"][kCrcKey] = hex8(crc);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string dir = directory_of(path);
  errno = 0;
  TmpFile out(path + ".tmp", dir);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  uint64_t bytes = 8 + text.size();
  for (const Tensor& t : parts.data) {
    out.write(t.data_ptr(), t.nbytes());
    bytes += t.nbytes();
  }
  out.sync_and_close();
  if (kill_before_this_rename()) std::raise(SIGKILL);
  out.rename_to(path);
  sync_directory(dir);
  return bytes;
}

CheckpointContents read_checkpoint_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) corrupt(path, std::string("cannot open it: ") + std::strerror(errno));
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  struct stat st{};
  if (::fstat(fileno(f), &st) != 0) corrupt(path, "cannot stat it");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) corrupt(path, "truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  unsigned char len[8];
  if (std::fread(len, 1, 8, f) != 8) corrupt(path, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > nn::kSafetensorsMaxHeaderSize || n > size - 8)
    corrupt(path, "truncated or damaged: the header length " + std::to_string(n) + " runs past the file's " +
                      std::to_string(size) + " bytes");
  std::string text(n, '\0');
  if (n > 0 && std::fread(text.data(), 1, n, f) != n) corrupt(path, "cannot read the header");
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    corrupt(path, std::string("damaged header (not JSON): ") + e.what());
  }
  if (!header.is_object() || !header.contains("__metadata__") || !header["__metadata__"].is_object())
    corrupt(path, "not a graft run checkpoint (no \"__metadata__\")");
  json& meta = header["__metadata__"];
  if (meta.value("graft.format", "") != kCheckpointFormat)
    corrupt(path, std::string("not a graft run checkpoint (\"graft.format\" is not \"") + kCheckpointFormat + "\")");
  if (!meta.contains(kCrcKey) || !meta[kCrcKey].is_string()) corrupt(path, "no \"graft.crc32\" checksum");
  const std::string stored = meta[kCrcKey].get<std::string>();
  meta.erase(kCrcKey);

  // The data section must be exactly as long as the tensor table says, before any hashing.
  uint64_t need = 0;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& off = (*it)["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[1].is_number_unsigned())
      corrupt(path, "damaged tensor table entry '" + it.key() + "'");
    need = std::max(need, off[1].get<uint64_t>());
  }
  const uint64_t have = size - 8 - n;
  if (have != need)
    corrupt(path, (have < need ? "truncated: the tensors need " : "damaged: the tensors need ") + std::to_string(need) +
                      " bytes of data but the file holds " + std::to_string(have));

  const std::string canonical = header.dump();
  uint32_t crc = crc_update(static_cast<uint32_t>(crc32(0, Z_NULL, 0)), canonical.data(), canonical.size());
  std::vector<char> buf(1 << 20);
  for (uint64_t left = have; left > 0;) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    if (std::fread(buf.data(), 1, piece, f) != piece) corrupt(path, "cannot read the data section");
    crc = crc_update(crc, buf.data(), piece);
    left -= piece;
  }
  if (hex8(crc) != stored)
    corrupt(path, "checksum mismatch: the file records crc32 " + stored + " but its bytes give " + hex8(crc) +
                      " (a damaged or partly written file)");

  CheckpointContents out;
  std::map<std::string, std::string> metadata;
  out.tensors = nn::load_safetensors(path, metadata);  // the full structural checks (invariant 2)
  out.state = metadata["graft.state"];
  out.bytes = size;
  return out;
}

}  // namespace graft::train
