#include "autograd/anomaly_mode.h"
#include "autograd/function.h"  // demangle

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#if GRAFT_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

namespace graft::autograd {

namespace {
thread_local bool t_enabled = false;
thread_local bool t_check_nan = true;

constexpr int kMaxFrames = 48;

std::string demangle_symbol(const char* name) { return name == nullptr ? std::string("??") : demangle(name); }

// The shared object a code address belongs to (dladdr: the loader's own table).
const void* module_base(const void* addr) {
  Dl_info info{};
  return dladdr(addr, &info) ? info.dli_fbase : nullptr;
}

struct Frame {
  std::string function, file;
  int line = 0;
};

#if GRAFT_HAVE_LIBDW
// One libdw session per report: the process's modules as they are mapped now.
class Symbolizer {
 public:
  Symbolizer() {
    static char* debuginfo_path = nullptr;
    callbacks_.find_elf = dwfl_linux_proc_find_elf;
    callbacks_.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks_.section_address = nullptr;
    callbacks_.debuginfo_path = &debuginfo_path;
    dwfl_ = dwfl_begin(&callbacks_);
    if (dwfl_ && (dwfl_linux_proc_report(dwfl_, getpid()) != 0 || dwfl_report_end(dwfl_, nullptr, nullptr) != 0)) {
      dwfl_end(dwfl_);
      dwfl_ = nullptr;
    }
  }
  ~Symbolizer() {
    if (dwfl_) dwfl_end(dwfl_);
  }
  Frame resolve(uintptr_t addr) {
    Frame f;
    Dwfl_Module* mod = dwfl_ ? dwfl_addrmodule(dwfl_, addr) : nullptr;
    if (mod == nullptr) return fallback(addr);
    f.function = demangle_symbol(dwfl_module_addrname(mod, addr));
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, addr)) {
      int lineno = 0;
      if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
        f.file = file;
        f.line = lineno;
      }
    }
    return f;
  }

 private:
  static Frame fallback(uintptr_t addr) {
    Frame f;
    Dl_info info{};
    f.function = dladdr(reinterpret_cast<void*>(addr), &info) ? demangle_symbol(info.dli_sname) : "??";
    return f;
  }
  Dwfl_Callbacks callbacks_{};
  Dwfl* dwfl_ = nullptr;
};
#else
// Without libdw: exported symbol names only (dladdr), no files or lines.
class Symbolizer {
 public:
  Frame resolve(uintptr_t addr) {
    Frame f;
    Dl_info info{};
    f.function = dladdr(reinterpret_cast<void*>(addr), &info) ? demangle_symbol(info.dli_sname) : "??";
    return f;
  }
};
#endif

}  // namespace

DetectAnomaly::DetectAnomaly(bool check_nan) : prev_enabled_(t_enabled), prev_check_nan_(t_check_nan) {
  t_enabled = true;
  t_check_nan = check_nan;
}

DetectAnomaly::~DetectAnomaly() {
  t_enabled = prev_enabled_;
  t_check_nan = prev_check_nan_;
}

void set_detect_anomaly(bool enabled, bool check_nan) {
  t_enabled = enabled;
  t_check_nan = check_nan;
}

bool is_anomaly_enabled() { return t_enabled; }
bool is_anomaly_check_nan_enabled() { return t_check_nan; }

std::shared_ptr<const ForwardTrace> capture_forward_trace() {
  if (!t_enabled) return nullptr;
  auto t = std::make_shared<ForwardTrace>();
  t->frames.resize(kMaxFrames);
  int n = backtrace(t->frames.data(), kMaxFrames);
  t->frames.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return t;
}

std::string format_forward_trace(const ForwardTrace& trace) {
  // Frames inside graft's own library (the node's constructor, the op's autograd wrapper) say
  // nothing about the user's call: start at the first frame outside it.
  const void* self = module_base(reinterpret_cast<const void*>(&capture_forward_trace));
  // (A sanitizer's interceptor may sit above graft's own frames: skip to graft, then past it.)
  size_t first = 0;
  while (first < trace.frames.size() && module_base(trace.frames[first]) != self) ++first;
  while (first < trace.frames.size() && module_base(trace.frames[first]) == self) ++first;
  if (first == trace.frames.size()) first = 0;
  Symbolizer sym;
  std::ostringstream os;
  int shown = 0;
  for (size_t i = first; i < trace.frames.size() && shown < 16; ++i) {
    // A return address points after the call: look up the call instruction itself.
    uintptr_t addr = reinterpret_cast<uintptr_t>(trace.frames[i]) - 1;
    Frame f = sym.resolve(addr);
    // Standard-library plumbing (make_shared, std::function) between the user's call and graft.
    size_t paren = f.function.find('(');
    if (f.function.substr(0, paren).find("std::") != std::string::npos || f.function.rfind("_ZNSt", 0) == 0) continue;
    os << "  #" << shown++ << " " << f.function;
    if (!f.file.empty()) os << " at " << f.file << ":" << f.line;
    os << "\n";
    if (f.function == "main" || f.function.rfind("__libc_start", 0) == 0) break;
  }
  return os.str();
}

}  // namespace graft::autograd
