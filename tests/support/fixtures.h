#pragma once
// Test data: the committed fixtures under tests/nn/data (PyTorch's outputs, made by
// tests/nn/data/make_*.py), files a test writes and reads back, and a synthetic data set for the
// `graft train` tests. One place knows where the fixtures live (meson compiles the path into
// fixtures.cpp as GRAFT_TEST_DATA_DIR), so no test needs the define.
#include <functional>
#include <map>
#include <string>

#include "graft.h"

namespace graft::test {

// The path of a committed fixture file, e.g. fixture_path("transformer_fixture.safetensors").
std::string fixture_path(const std::string& name);

// The path of a committed file under tests/, e.g. tests_path("runtime/data/rounding.json").
std::string tests_path(const std::string& relative);

// A committed safetensors fixture, read once per process and kept.
const std::map<std::string, Tensor>& safetensors_fixture(const std::string& name);

// A whole file as bytes; throws std::runtime_error when it cannot be read.
std::string read_file(const std::string& path);
// Replaces `path` with `bytes`; throws std::runtime_error when it cannot be written.
void write_file(const std::string& path, const std::string& bytes);

// A Fashion-MNIST-shaped data set in `dir` (train-* and t10k-*, images-idx3-ubyte.gz and
// labels-idx1-ubyte.gz, as `graft train --data` reads) that a model learns in a few steps: sample
// i, of class label(i) (default i % 10), is a bright 7x7 square at a place set by its class, over
// pixel noise below `noise`.
void write_square_data_set(const std::string& dir, int n_train, int n_test, int noise = 20,
                           const std::function<int(int)>& label = {});

}  // namespace graft::test
