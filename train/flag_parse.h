#pragma once
// The text of a command-line value, read as a typed value. Each function throws graft::Error
// whose message says in words what was expected and what came ("expected a whole number of at
// least 1, got 2.5"), never a raw bound: the caller puts the flag's name in front.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graft::train {

// A size as written ("16MiB", "512KiB", "1.5GiB", "1000000" bytes; K/M/G and KB/MB/GB read as
// binary units too), kept with its text so reports name it as the user did.
struct ByteSize {
  int64_t bytes = 0;
  std::string text;
};

// A whole number (decimal digits, an optional sign) of at least `min`.
int64_t parse_whole_number(const std::string& text, int64_t min);
// A whole number from 0 to 2^64 - 1 (seeds).
uint64_t parse_unsigned(const std::string& text);
// A finite number above `min` (`strictly`) or at least `min`.
double parse_number(const std::string& text, double min, bool strictly);
// A positive size.
ByteSize parse_byte_size(const std::string& text);
// "true"/"on"/"1" or "false"/"off"/"0".
bool parse_switch(const std::string& text);
// The position of `text` in `names`.
size_t parse_choice(const std::string& text, const std::vector<std::string_view>& names);

// "a, b or c".
std::string words_list(const std::vector<std::string_view>& names);

}  // namespace graft::train
