#pragma once
// Autocast: mixed precision chosen per op, as torch.autocast.
//
//   {
//     autocast::AutocastGuard ac(kCPU, kBFloat16);
//     Tensor y = model.forward(x);          // matmul, linear, conv2d... run in bfloat16
//     Tensor loss = graft::cross_entropy(y, t);  // losses run in float32
//   }
//   loss.backward();                          // each op's backward in its forward's dtype
//
// Each declared op has a cast policy per device (codegen/ops/*.yaml, key `autocast:`; the lists
// follow PyTorch's and are in docs/API.md): Lower casts its floating inputs to the scope's dtype,
// Fp32 to float32, Promote to the widest floating input type; ops without one run on whatever
// their inputs are.
//
// Invariants:
// 1. Casting happens in graft:: (the autograd layer) before the op records its node, as PyTorch's
//    Autocast dispatch key sits above Autograd: each cast is a recorded _to_copy, so the node
//    saves the cast tensors (saved-tensor hooks see them), its backward runs in the dtype the
//    forward used, and the gradient reaching a float32 parameter is cast back to float32 by the
//    cast's own backward.
// 2. Only eligible tensors are cast: floating, on the device type the op runs on, and not float64
//    (PyTorch leaves double alone). Integer tensors (indices, targets) and undefined optionals are
//    passed through.
// 3. Inside the body of an op autocast acted on, autocast is suspended for this thread, so a
//    composite op's inner ops (sdpa's softmax, matmul's mm) run in the dtype chosen for the
//    whole op, as PyTorch excludes the Autocast key while redispatching. An op without a policy
//    is not suspended: its inner ops get their own policies (cross_entropy on CUDA).
// 4. State is per thread and per device type: a new thread starts with autocast off; guards nest
//    and each restores what it found. The engine runs backward with autocast off on every device
//    type; checkpoint recomputation reinstalls the state its forward ran under.
// 5. The cast cache: while an enabled scope is open, a float32 leaf that requires grad (a
//    parameter), cast to its device's autocast dtype, is cast once and the same cast tensor is
//    reused by every later op (one _to_copy and one backward node per parameter per forward).
//    An entry is dropped when its source's version changes (an in-place update), a cast made
//    without history is not reused where history is being recorded (a no_grad cast under a
//    later grad-mode op would cut the parameter off its gradient), and the cache is cleared when
//    the outermost enabled scope closes. Non-leaves and views are never cached: they are
//    different tensors each forward.
#include <array>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace graft::autocast {

// Enables (or, enabled = false, disables) autocast for `device`'s type on this thread while
// alive. dtype must be bfloat16 or float16. The one-argument form keeps the device type's current
// dtype (bfloat16 on CPU, float16 on CUDA unless a scope set another), as torch.autocast(device).
class AutocastGuard {
 public:
  AutocastGuard(Device device, DType dtype, bool enabled = true);
  explicit AutocastGuard(Device device, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool opens_scope_;
};

bool is_autocast_enabled(DeviceType type);
// The dtype Lower ops run in on `type` (bfloat16 on CPU, float16 on CUDA by default).
DType get_autocast_dtype(DeviceType type);

// The whole thread state, for features that must replay it elsewhere (checkpoint recomputation
// reinstalls the forward's; the engine installs one with everything off).
struct AutocastState {
  std::array<bool, kNumDeviceTypes> enabled{};
  std::array<DType, kNumDeviceTypes> dtype{DType::BFloat16, DType::Float16};
  bool any_enabled() const;
};
AutocastState current_state();
// Installs `state` while alive and restores the thread's own on exit; opens a cache scope when
// `state` enables some device type.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState prev_;
  bool opens_scope_;
};

// ---- the policies ----
enum class CastPolicy : uint8_t { None, Lower, Fp32, Promote };
const char* cast_policy_name(CastPolicy p);  // "none", "lower", "fp32", "promote"

struct OpPolicy {
  CastPolicy cpu = CastPolicy::None;
  CastPolicy cuda = CastPolicy::None;
  constexpr CastPolicy on(DeviceType t) const { return t == DeviceType::CUDA ? cuda : cpu; }
};

// The declared policy of a graft:: function by its declared name ("mm", "pow.Tensor_Scalar");
// a plain name with overloads ("pow") answers when every overload has the same policy. nullopt:
// no public function of that name.
std::optional<OpPolicy> op_policy(std::string_view name);
// Every public function with a policy on some device, in declaration order.
struct NamedPolicy {
  std::string_view name;
  OpPolicy policy;
};
std::vector<NamedPolicy> op_policies();

// The decision itself: the dtype an op with `policy` casts its eligible inputs to under autocast
// to `lower`, given the dtypes of its floating inputs on the op's device (float64 ones included:
// they are ignored, invariant 2). nullopt for None. Promote starts from `lower` and widens to
// float32 when any input is float32; float16 together with bfloat16 is an error, as PyTorch.
std::optional<DType> cast_dtype(CastPolicy policy, DType lower, const std::vector<DType>& floating_inputs,
                                std::string_view op = "autocast");

// Number of parameters in the cast cache of this thread (tests and diagnostics).
size_t cast_cache_size();

// ---- what generated and composite graft:: functions call (not for users) ----
namespace detail {

// Some device type is enabled on this thread and no autocast-handled op body is running. One
// thread-local read: every graft:: function with a policy asks it first.
bool active();

// Decides the cast for one op call, and while alive (when it casts) suspends autocast for the
// thread (invariant 3). Use:
//   if (autocast::detail::active()) {
//     autocast::detail::OpCast c("mm", policies::mm, {&self, &mat2});
//     if (c) return graft::mm(c(self), c(mat2));
//   }
class OpCast {
 public:
  OpCast(const char* op, OpPolicy policy, std::initializer_list<const Tensor*> tensors);
  OpCast(const char* op, OpPolicy policy, const std::vector<Tensor>& list,
         std::initializer_list<const Tensor*> tensors = {});
  ~OpCast();
  OpCast(const OpCast&) = delete;
  OpCast& operator=(const OpCast&) = delete;
  explicit operator bool() const { return acting_; }
  Tensor operator()(const Tensor& t) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& ts) const;

 private:
  void decide(const char* op, OpPolicy policy, const std::vector<const Tensor*>& tensors);
  bool acting_ = false;
  DeviceType device_ = DeviceType::CPU;
  DType to_ = DType::Float32;
};

}  // namespace detail
}  // namespace graft::autocast
