#include "train/flag_parse.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "runtime/error.h"

namespace graft::train {

int64_t parse_whole_number(const std::string& text, int64_t min) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  GRAFT_CHECK(end != text.c_str() && *end == '\0' && errno != ERANGE && v >= min,
              "expected a whole number of at least ", min, ", got ", text);
  return v;
}

uint64_t parse_unsigned(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  bool negative = text.find('-') != std::string::npos;  // strtoull wraps "-1" around
  GRAFT_CHECK(end != text.c_str() && *end == '\0' && errno != ERANGE && !negative,
              "expected a whole number of at least 0, got ", text);
  return v;
}

double parse_number(const std::string& text, double min, bool strictly) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  bool ok = end != text.c_str() && *end == '\0' && std::isfinite(v) && (strictly ? v > min : v >= min);
  GRAFT_CHECK(ok, "expected a number ", strictly ? "above " : "of at least ", min, ", got ", text);
  return v;
}

ByteSize parse_byte_size(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    GRAFT_ERROR("cannot read '", text, "' as a size (for example 16MiB)");
  }
  static const std::pair<std::string_view, double> units[] = {
      {"", 1},          {"B", 1},          {"K", 1 << 10},  {"KB", 1 << 10}, {"KiB", 1 << 10},
      {"M", 1 << 20},   {"MB", 1 << 20},   {"MiB", 1 << 20}, {"G", 1 << 30}, {"GB", 1 << 30}, {"GiB", 1 << 30}};
  const std::string unit = text.substr(used);
  double scale = 0;
  for (const auto& [name, bytes] : units)
    if (unit == name) scale = bytes;
  GRAFT_CHECK(scale > 0 && v > 0 && std::isfinite(v * scale) && v * scale < 9e18,
              "cannot read '", text, "' as a positive size (for example 16MiB)");
  return {static_cast<int64_t>(v * scale), text};
}

bool parse_switch(const std::string& text) {
  if (text == "true" || text == "on" || text == "1") return true;
  if (text == "false" || text == "off" || text == "0") return false;
  GRAFT_ERROR("expected true or false, got ", text);
}

size_t parse_choice(const std::string& text, const std::vector<std::string_view>& names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return i;
  GRAFT_ERROR("expected ", words_list(names), ", got ", text);
}

std::string words_list(const std::vector<std::string_view>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) s += i + 1 == names.size() ? " or " : ", ";
    s += names[i];
  }
  return s;
}

}  // namespace graft::train
