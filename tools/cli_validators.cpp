#include "tools/cli_validators.h"

#include "runtime/error.h"
#include "train/flag_parse.h"
#include "train/recipe.h"

namespace graft::tools {

CLI::Validator whole_number_at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        try {
          train::parse_whole_number(s, min);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "");
}

CLI::Validator recipe_value(const std::string& flag) {
  return CLI::Validator([flag](std::string& s) { return train::Recipe::check(flag, s); }, "");
}

}  // namespace graft::tools
