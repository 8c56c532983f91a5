// `graft info` and `graft demo`.
#include <CLI/CLI.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <iostream>

#include "cuda/cuda_backend.h"
#include "graft.h"
#include "graft_config.h"
#include "ops/dnnl_utils.h"
#include "runtime/cpu_isa.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

// The implementation oneDNN picks for a bfloat16 matmul (under ONEDNN_MAX_CPU_ISA), and whether
// graft uses it; when not, graft computes bf16 products in float32 (ops/linalg.cpp).
std::string bf16_line() {
  const std::string& impl = dnnl_utils::bf16_matmul_impl();
  if (impl.empty()) return "none (bf16 falls back to graft's float path)";
  if (dnnl_utils::use_bf16_primitives()) return impl + " (matmul)";
  const bool hardware = dnnl_utils::choose_bf16_primitives(impl, false, "on");
  return impl + (hardware ? " (matmul; no faster than float32 on this CPU, so graft computes bf16 in float32;"
                            " GRAFT_BF16_PRIMITIVES=on uses it)"
                          : " (matmul; emulated, so graft computes bf16 in float32)");
}

int run_info() {
  const dnnl_version_t* v = dnnl_version();
  std::cout << "graft " << GRAFT_VERSION << '\n'
            << "build type:     " << GRAFT_BUILD_TYPE << '\n'
            << "oneDNN:         " << v->major << '.' << v->minor << '.' << v->patch << '\n'
            << "CUDA backend:   " << (cuda::built_with_cuda() ? "built" : "not built") << '\n'
            << "CUDA runtime:   " << cuda_hooks().runtime_version() << '\n'
            << "CPU threads:    " << get_num_threads()
            << (contention_policy() == ContentionPolicy::Adapt
                    ? " (one thread while other processes keep the cores busy; GRAFT_CONTENTION=fixed turns that off)"
                    : " (fixed: GRAFT_CONTENTION=fixed)")
            << '\n'
            << "CPU ISA:        " << cpu_isa_name(cpu_isa()) << " (detected " << cpu_isa_name(detected_cpu_isa())
            << "; GRAFT_MAX_CPU_ISA caps graft's own loops)\n"
            << "oneDNN bf16:    " << bf16_line() << '\n'
            << "devices:        cpu";
  for (int i = 0; i < cuda_device_count(); ++i) std::cout << ", cuda:" << i << " (" << cuda_hooks().device_name(i) << ")";
  std::cout << '\n' << "registered ops: " << registered_ops().size() << '\n';
  return 0;
}

int run_demo() {
  manual_seed(0);
  Tensor a = arange(6, dtype(kFloat32)).view({2, 3});
  std::cout << "a = arange(6).view({2, 3})\n" << a << "\n\n";
  Tensor at = a.t();
  std::cout << "a.t() is a view: same storage, strides " << shape_str(at.strides()) << "\n" << at << "\n\n";
  Tensor b = randn({3, 2});
  std::cout << "b = randn({3, 2}) with seed 0\n" << b << "\n\n";
  std::cout << "a.matmul(b)\n" << a.matmul(b) << "\n\n";
  std::cout << "softmax(a, 1)\n" << a.softmax(1) << "\n\n";
  int64_t v0 = a.version();
  at.mul_(2);
  std::cout << "after a.t().mul_(2): a.version() " << v0 << " -> " << a.version() << "\n" << a << "\n\n";
  MemoryStats s = memory_stats(kCPU);
  std::cout << "cpu memory: allocated " << s.allocated_bytes << " B, peak " << s.peak_allocated_bytes << " B, "
            << s.num_allocs << " allocs\n";
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  return {app.add_subcommand("info", "Version, build, devices, library versions and threads"), run_info};
}

Command add_demo_command(CLI::App& app) {
  return {app.add_subcommand("demo", "A short tour of the tensor runtime"), run_demo};
}

}  // namespace graft::tools
