#include "runtime/generator.h"

#include <map>
#include <memory>

namespace graft {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t ctr, uint64_t sub) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  uint32_t c0 = static_cast<uint32_t>(ctr), c1 = static_cast<uint32_t>(ctr >> 32);
  uint32_t c2 = static_cast<uint32_t>(sub), c3 = static_cast<uint32_t>(sub >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1, n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> g(mu_);
  state_ = {seed, 0};
}
RngState Generator::get_state() const {
  std::lock_guard<std::mutex> g(mu_);
  return state_;
}
void Generator::set_state(const RngState& s) {
  std::lock_guard<std::mutex> g(mu_);
  state_ = s;
}
uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> g(mu_);
  return state_.seed;
}
uint64_t Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t start = state_.offset;
  state_.offset += n;
  return start;
}

namespace {
struct Registry {
  std::mutex mu;
  Generator cpu;
  std::map<int, std::unique_ptr<Generator>> cuda;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
}  // namespace

Generator& default_generator(Device device) {
  Registry& r = registry();
  if (device.is_cpu()) return r.cpu;
  std::lock_guard<std::mutex> g(r.mu);
  auto& slot = r.cuda[device.index];
  if (!slot) slot = std::make_unique<Generator>(r.cpu.seed());
  return *slot;
}

void manual_seed(uint64_t seed) {
  Registry& r = registry();
  r.cpu.manual_seed(seed);
  std::lock_guard<std::mutex> g(r.mu);
  for (auto& [idx, gen] : r.cuda) gen->manual_seed(seed);
}

}  // namespace graft
