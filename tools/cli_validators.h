#pragma once
// CLI11 validators that say what a flag wants in words (CLI11's own print their bounds, e.g. a
// 309-digit double for PositiveNumber). Their messages come from train/flag_parse.h and the
// Recipe, so `graft train` and `graft bench` word a bad value alike.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace graft::tools {

// A whole number of at least `min`.
CLI::Validator whole_number_at_least(int64_t min);
// What train::Recipe::set(flag, text) accepts.
CLI::Validator recipe_value(const std::string& flag);

}  // namespace graft::tools
