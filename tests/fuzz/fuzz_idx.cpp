// libFuzzer target for the IDX reader (gzip or plain): any input must load or throw graft::Error.
#include <cstdint>

#include "fuzz_common.h"
#include "data/idx_reader.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = graft_fuzz::write_input(data, size);
  try {
    graft::data::IdxArray a = graft::data::read_idx(path);
    volatile uint8_t sink = 0;
    for (uint8_t b : a.data) sink = sink ^ b;
    (void)sink;
  } catch (const graft::Error&) {
  }
  // The typed loaders on the same bytes (magic/dims checks and tensor conversion).
  try {
    graft::data::load_idx_images(path);
  } catch (const graft::Error&) {
  }
  try {
    graft::data::load_idx_labels(path);
  } catch (const graft::Error&) {
  }
  return 0;
}
