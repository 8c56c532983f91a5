// libFuzzer target for nn::load_safetensors: any input must load or throw graft::Error, never
// crash, leak or read out of bounds. Loaded tensors are read back in full to catch short reads.
#include <cstdint>

#include "fuzz_common.h"
#include "nn/safetensors.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = graft_fuzz::write_input(data, size);
  try {
    std::map<std::string, std::string> meta;
    auto tensors = graft::nn::load_safetensors(path, meta);
    volatile uint8_t sink = 0;
    for (const auto& [name, t] : tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
    }
    (void)sink;
  } catch (const graft::Error&) {
  }
  return 0;
}
