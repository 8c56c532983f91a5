#pragma once
// SaveOnDisk: saved-tensor hooks that move each large saved tensor to a file while the graph waits
// for backward, and read it back when backward needs it. The CPU counterpart of SaveOnCpu: on a
// CPU device the memory to free is host memory, so the tensor goes one level further out.
//
//   {
//     autograd::SaveOnDisk disk("/scratch");   // tensors of 1 MiB and more go to /scratch
//     loss = model.forward(x).sum();
//   }
//   loss.backward();                            // files come back one by one, then are gone
//
// Invariants:
// 1. Each SaveOnDisk scope writes into one private directory it creates under `dir` (mkdtemp,
//    mode 0700), so two scopes, processes or users never share names.
// 2. Every file belongs to exactly one packed entry, and the entry deletes it when the last copy of
//    it dies: when the SavedVariable is released after backward, when a graph dies unused (an
//    exception before backward), or when a retain_graph graph is finally dropped. The directory is
//    removed when its scope and all its entries are gone. So nothing stays on disk, whatever path
//    backward takes.
// 3. A file is written whole before pack returns and is never changed after; unpack reads it whole
//    into a fresh tensor, as often as backward asks (retain_graph unpacks twice). Entries are
//    immutable, names come from an atomic counter, so concurrent backwards need no lock.
// 4. Every failure is a graft::Error naming the path, the tensor's bytes and the system's reason
//    (a full disk, a short write or read, a directory that cannot be created). A failed pack
//    removes its partial file before throwing.
// 5. Tensors below `min_bytes` are kept in memory as they are (files cost a syscall each), and so
//    are leaves that require grad: a parameter's storage is held by its module, so a file would
//    free nothing and cost a write and a read per step.
//    A non-CPU tensor is copied to the host, written, and copied back to its device on unpack.
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "autograd/saved_tensor_hooks.h"

namespace graft::autograd {

class SaveOnDisk : public SavedTensorsHooks {
 public:
  explicit SaveOnDisk(std::string dir, int64_t min_bytes = 1 << 20);
};

namespace detail {
// The file operations SaveOnDisk performs, behind a small interface so tests can inject short
// writes, short reads and a full disk. The default calls ::pwrite and ::pread.
struct DiskIo {
  virtual ~DiskIo() = default;
  virtual ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset);
  virtual ssize_t pread(int fd, void* buf, size_t n, off_t offset);
};
// Installs `io` for every SaveOnDisk (nullptr restores the default); returns the previous one.
DiskIo* set_disk_io(DiskIo* io);
}  // namespace detail

}  // namespace graft::autograd
