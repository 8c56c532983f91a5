#pragma once
// Generator: a counter-based (Philox4x32-10) random stream per device.
//
// Invariants:
// - The whole state is (seed, offset). A fill of n numbers reserves a block of counters
//   [offset, offset + k) under the lock and then computes element i from counter offset + i/w
//   alone, so the numbers do not depend on thread count or on the device: a CUDA kernel using the
//   same mapping draws the same values. That is what makes checkpoint replay exact.
// - get_state()/set_state() capture and restore the stream exactly.
#include <array>
#include <cstdint>
#include <mutex>

#include "runtime/device.h"

namespace graft {

struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  friend bool operator==(const RngState&, const RngState&) = default;
};

// One Philox4x32-10 block: four 32-bit words for (key = seed, counter = ctr, subsequence = sub).
std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t ctr, uint64_t sub = 0);

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : state_{seed, 0} {}
  void manual_seed(uint64_t seed);
  RngState get_state() const;
  void set_state(const RngState& s);
  uint64_t seed() const;
  // Reserves `n` Philox blocks and returns the first counter of the reservation.
  uint64_t reserve(uint64_t n);

 private:
  mutable std::mutex mu_;
  RngState state_;
};

// The default generator of a device (CUDA generators are created on first use per index).
Generator& default_generator(Device device = Device(DeviceType::CPU));
// Seeds every device's default generator, as torch.manual_seed does.
void manual_seed(uint64_t seed);

// Counter -> number helpers shared by CPU and CUDA fills.
inline float uint_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
inline double uint_to_unit_double(uint32_t hi, uint32_t lo) {
  uint64_t v = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(v) * (1.0 / 9007199254740992.0);
}

}  // namespace graft
