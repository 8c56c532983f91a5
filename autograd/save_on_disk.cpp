#include "autograd/save_on_disk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/tensor_meta.h"

namespace graft::autograd {

namespace detail {
ssize_t DiskIo::pwrite(int fd, const void* buf, size_t n, off_t offset) { return ::pwrite(fd, buf, n, offset); }
ssize_t DiskIo::pread(int fd, void* buf, size_t n, off_t offset) { return ::pread(fd, buf, n, offset); }

namespace {
DiskIo g_default_io;
std::atomic<DiskIo*> g_io{&g_default_io};
}  // namespace

DiskIo* set_disk_io(DiskIo* io) { return g_io.exchange(io ? io : &g_default_io); }
}  // namespace detail

namespace {

std::string reason(int err) { return std::system_category().message(err); }

// The scope's private directory; removed (it is empty by then) when the scope and every entry
// written into it are gone.
struct DiskDir {
  std::string path;
  std::atomic<uint64_t> next{0};
  explicit DiskDir(const std::string& parent) {
    std::string tmpl = parent + "/graft-saved-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      int err = errno;
      GRAFT_ERROR("SaveOnDisk: cannot create a private directory in '", parent, "': ", reason(err));
    }
    path = buf.data();
  }
  ~DiskDir() { ::rmdir(path.c_str()); }
};

// One saved tensor on disk. Owns its file: the destructor unlinks it (invariant 2).
struct DiskEntry {
  std::shared_ptr<DiskDir> dir;
  std::string path;
  TensorMeta meta;
  size_t nbytes = 0;
  bool created = false;
  ~DiskEntry() {
    if (created) ::unlink(path.c_str());
  }
};

// What the pack hook returns: the tensor itself when small, else the entry.
struct DiskPacked {
  Tensor kept;
  std::shared_ptr<const DiskEntry> entry;
};

// Closes a descriptor on every path out of a scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_file(DiskEntry& e, const Tensor& host) {
  Fd f{::open(e.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (f.fd < 0) {
    int err = errno;
    GRAFT_ERROR("SaveOnDisk: cannot create '", e.path, "' for a saved tensor of ", e.nbytes, " bytes: ", reason(err));
  }
  e.created = true;
  detail::DiskIo* io = detail::g_io.load();
  const char* p = static_cast<const char*>(host.data_ptr());
  size_t done = 0;
  while (done < e.nbytes) {
    ssize_t w = io->pwrite(f.fd, p + done, e.nbytes - done, static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : ENOSPC;  // a write of 0 bytes makes no progress: the disk is full
      GRAFT_ERROR("SaveOnDisk: writing a saved tensor of ", e.nbytes, " bytes to '", e.path, "' failed after ",
                  done, " bytes: ", reason(err));
    }
    done += static_cast<size_t>(w);
  }
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) {
    int err = errno;
    GRAFT_ERROR("SaveOnDisk: closing '", e.path, "' (a saved tensor of ", e.nbytes, " bytes) failed: ", reason(err));
  }
}

Tensor read_file(const DiskEntry& e) {
  Tensor host = ops::empty(e.meta.shape, e.meta.dtype);
  Fd f{::open(e.path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    int err = errno;
    GRAFT_ERROR("SaveOnDisk: cannot open '", e.path, "' to read back a saved tensor of ", e.nbytes,
                " bytes: ", reason(err));
  }
  detail::DiskIo* io = detail::g_io.load();
  char* p = static_cast<char*>(host.data_ptr());
  size_t done = 0;
  while (done < e.nbytes) {
    ssize_t r = io->pread(f.fd, p + done, e.nbytes - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      GRAFT_ERROR("SaveOnDisk: reading a saved tensor of ", e.nbytes, " bytes from '", e.path, "' failed after ",
                  done, " bytes: ", reason(err));
    }
    if (r == 0)
      GRAFT_ERROR("SaveOnDisk: '", e.path, "' ended after ", done, " of the saved tensor's ", e.nbytes,
                  " bytes (was the file truncated?)");
    done += static_cast<size_t>(r);
  }
  return host;
}

}  // namespace

SaveOnDisk::SaveOnDisk(std::string dir, int64_t min_bytes)
    : SavedTensorsHooks(
          [d = std::make_shared<DiskDir>(dir), min_bytes](const Tensor& t) -> Packed {
            // A parameter (a leaf that requires grad) is held by its module anyway: a file would free
            // nothing and cost a write and a read per step.
            if (!t.defined() || static_cast<int64_t>(t.nbytes()) < min_bytes || (t.is_leaf() && t.requires_grad()))
              return DiskPacked{t, nullptr};
            Tensor host = t.is_cpu() ? ops::contiguous(t) : ops::contiguous(ops::to_device(t, kCPU));
            auto e = std::make_shared<DiskEntry>();
            e->dir = d;
            e->path = d->path + "/t" + std::to_string(d->next.fetch_add(1)) + ".bin";
            e->meta = TensorMeta::of(t);
            e->nbytes = host.nbytes();
            write_file(*e, host);  // on error, e's destructor removes the partial file
            return DiskPacked{Tensor(), std::move(e)};
          },
          [](const Packed& p) -> Tensor {
            const auto& dp = std::any_cast<const DiskPacked&>(p);
            if (!dp.entry) return dp.kept;
            Tensor host = read_file(*dp.entry);
            if (dp.entry->meta.device.is_cpu()) return host;
            return ops::to_device(host, dp.entry->meta.device);
          },
          /*check_unpacked_metadata=*/true, "save_on_disk", /*prefetchable=*/true) {}

}  // namespace graft::autograd
