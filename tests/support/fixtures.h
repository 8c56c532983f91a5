#pragma once
// Test data: the committed fixtures under tests/nn/data (PyTorch's outputs, made by
// tests/nn/data/make_*.py) and files a test writes and reads back. One place knows where the
// fixtures live (meson compiles the path into fixtures.cpp as GRAFT_TEST_DATA_DIR), so no test
// needs the define.
#include <map>
#include <string>

#include "graft.h"

namespace graft::test {

// The path of a committed fixture file, e.g. fixture_path("transformer_fixture.safetensors").
std::string fixture_path(const std::string& name);

// A committed safetensors fixture, read once per process and kept.
const std::map<std::string, Tensor>& safetensors_fixture(const std::string& name);

// A whole file as bytes; throws std::runtime_error when it cannot be read.
std::string read_file(const std::string& path);
// Replaces `path` with `bytes`; throws std::runtime_error when it cannot be written.
void write_file(const std::string& path, const std::string& bytes);

}  // namespace graft::test
