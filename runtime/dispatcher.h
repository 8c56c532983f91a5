#pragma once
// The op registry and dispatcher.
//
// Every op is registered once, by name, with an OpSchema and one kernel per device type. A call
// goes: ops::add(a, b) -> box args into a Stack -> Dispatcher::call -> dispatch-mode stack (if
// any mode is active) -> the kernel of the tensors' device -> bump the version of written args.
//
// Invariants:
// - Op objects are created once and never move or die (the registry is leaked on purpose), so a
//   `static Op& op = op_handle("add")` cached at the call site stays valid forever.
// - Kernels are chosen from the devices of the tensor arguments; they must all agree unless the
//   schema is cross_device (copies), in which case the CUDA kernel handles any CUDA/CPU pair,
//   including a CUDA target given as a Device argument (`_to_copy` of a CPU tensor to cuda:0).
//   Ops with no tensor argument (factories) use their Device argument.
// - The version counter of each argument the schema marks written `(a!)` is bumped exactly once,
//   here, after the kernel: kernels never bump, so no in-place op can forget or double count.
//   Kernels therefore must not dispatch in-place ops on their own fresh outputs (they call the
//   undispatched helpers in ops/ instead), so a new tensor starts at version 0.
// - Dispatch modes are a thread-local stack. While a mode handles a call, ops it issues go to the
//   modes below it (never to itself again), and `next` continues down the stack to the kernel.
#include <array>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/ivalue.h"
#include "runtime/op_schema.h"

namespace graft {

using OpResult = std::vector<Tensor>;
using BoxedKernel = OpResult (*)(Stack& args);

struct Op {
  OpSchema schema;
  bool has_schema = false;
  std::array<BoxedKernel, kNumDeviceTypes> kernels{};
  const std::string& name() const { return schema.name; }
};

class DispatchMode;

// Continues a call from a dispatch mode to the modes below it and then to the kernel.
class DispatchNext {
 public:
  DispatchNext(const Op& op, int level) : op_(op), level_(level) {}
  OpResult operator()(Stack& args) const;

 private:
  const Op& op_;
  int level_;
};

class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  // Sees every op call issued while this mode is on the stack. Return the outputs: usually
  // `next(args)`, possibly with changed args or a changed result.
  virtual OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) = 0;
};

// Pushes a mode for the guard's lifetime (innermost mode sees calls first).
class DispatchModeGuard {
 public:
  explicit DispatchModeGuard(DispatchMode* mode);
  ~DispatchModeGuard();
  DispatchModeGuard(const DispatchModeGuard&) = delete;
  DispatchModeGuard& operator=(const DispatchModeGuard&) = delete;

 private:
  DispatchMode* mode_;
};

// Number of modes visible to the current call (0 = straight to the kernel).
int dispatch_mode_depth();

// Finds (creating on first use) the op with this full name ("add", "max.dim").
Op& op_handle(const std::string& full_name);
// Registers the schema; the op's full name comes from the schema text.
Op& define_op(const std::string& schema_text, bool cross_device = false);
void register_kernel(const std::string& full_name, DeviceType device, BoxedKernel kernel);
// Every registered op, sorted by name (for `graft info` and tests).
std::vector<const Op*> registered_ops();

// Runs `op` with boxed args through the modes and the kernel.
OpResult dispatch(const Op& op, Stack& args);
// Runs the kernel only (no modes); used by DispatchNext at the bottom of the stack.
OpResult dispatch_kernel(const Op& op, Stack& args);

// ---- boxing adapters ----
namespace detail {
inline OpResult to_result(Tensor t) { return OpResult{std::move(t)}; }
inline OpResult to_result(std::vector<Tensor> v) { return v; }
template <class... T> OpResult to_result(std::tuple<T...> t) {
  return std::apply([](auto&&... x) { return OpResult{std::move(x)...}; }, std::move(t));
}
template <class F> struct fn_traits;
template <class R, class... A> struct fn_traits<R (*)(A...)> {
  using args = std::tuple<A...>;
  static constexpr size_t arity = sizeof...(A);
};
}  // namespace detail

// Wraps a typed kernel `Tensor f(const Tensor&, int64_t, ...)` as a BoxedKernel.
template <auto Fn>
OpResult boxed(Stack& s) {
  using Tr = detail::fn_traits<decltype(Fn)>;
  GRAFT_CHECK(s.size() == Tr::arity, "dispatcher: kernel expects ", Tr::arity, " arguments, got ", s.size());
  return [&]<size_t... I>(std::index_sequence<I...>) {
    if constexpr (std::is_void_v<decltype(Fn(Unbox<std::tuple_element_t<I, typename Tr::args>>::get(s[I])...))>) {
      Fn(Unbox<std::tuple_element_t<I, typename Tr::args>>::get(s[I])...);  // an op that returns () writes its args
      return OpResult{};
    } else {
      return detail::to_result(Fn(Unbox<std::tuple_element_t<I, typename Tr::args>>::get(s[I])...));
    }
  }(std::make_index_sequence<Tr::arity>{});
}

// Calls an op with C++ arguments. Flattened: the generated ops:: file holds every op's call site,
// and without it GCC stops inlining the stack's reserve and destructor there (unit growth), which
// costs each op call about 150 instructions (callgrind, the engine benchmark's chain).
// Not under a sanitizer: there every inlined body is instrumented again, and the ~300 flattened
// call sites made ops_generated.cpp alone take 8 minutes to compile (ASan+UBSan, -O1), most of
// CI's sanitizer job. Sanitizer builds measure correctness, not per-op instructions.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRAFT_FLATTEN
#else
#define GRAFT_FLATTEN [[gnu::flatten]]
#endif
template <class... A>
GRAFT_FLATTEN OpResult call_op(const Op& op, const A&... args) {
  Stack s;
  s.reserve(sizeof...(A));
  (s.push_back(box(args)), ...);
  return dispatch(op, s);
}

// Static registration helpers, used at namespace scope in ops/ and cuda/ sources.
struct OpRegistrar {
  OpRegistrar(const char* schema, bool cross_device = false) { define_op(schema, cross_device); }
};
struct KernelRegistrar {
  KernelRegistrar(const char* name, DeviceType d, BoxedKernel k) { register_kernel(name, d, k); }
};

}  // namespace graft

#define GRAFT_CONCAT_INNER(a, b) a##b
#define GRAFT_CONCAT(a, b) GRAFT_CONCAT_INNER(a, b)
// Caches an op handle at a call site: GRAFT_OP_HANDLE(op, "add"); call_op(op, a, b);
#define GRAFT_OP_HANDLE(var, name) static const ::graft::Op& var = ::graft::op_handle(name)
// GRAFT_DEFINE_OP("add(Tensor self, Tensor other, Scalar alpha) -> Tensor");
#define GRAFT_DEFINE_OP(...) \
  static ::graft::OpRegistrar GRAFT_CONCAT(graft_op_registrar_, __COUNTER__)(__VA_ARGS__)
// GRAFT_KERNEL("add", CPU, add_cpu);  (add_cpu is a typed function)
#define GRAFT_KERNEL(name, dev, fn)                                                        \
  static ::graft::KernelRegistrar GRAFT_CONCAT(graft_kernel_registrar_, __COUNTER__)( \
      name, ::graft::DeviceType::dev, &::graft::boxed<&fn>)
