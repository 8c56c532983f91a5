#include "runtime/op_schema.h"

#include <cctype>
#include <sstream>

#include "runtime/error.h"

namespace graft {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits on commas at bracket depth 0.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

// "Tensor(a!) self" or "Tensor(a)" (a return) or "int[] dims=[]".
ArgSchema parse_arg(const std::string& text, bool is_return, const std::string& whole) {
  ArgSchema a;
  std::string t = trim(text);
  if (auto eq = t.find('='); eq != std::string::npos) t = trim(t.substr(0, eq));  // defaults are C++'s business
  size_t sp = t.rfind(' ');
  std::string type = is_return || sp == std::string::npos ? t : t.substr(0, sp);
  if (!is_return) {
    GRAFT_CHECK(sp != std::string::npos, "op schema: argument '", text, "' has no name in '", whole, "'");
    a.name = t.substr(sp + 1);
  }
  if (auto lp = type.find('('); lp != std::string::npos) {
    auto rp = type.find(')', lp);
    GRAFT_CHECK(rp != std::string::npos, "op schema: unbalanced alias annotation in '", whole, "'");
    std::string ann = type.substr(lp + 1, rp - lp - 1);
    if (!ann.empty() && ann.back() == '!') {
      a.is_write = true;
      ann.pop_back();
    }
    a.alias = ann;
    type = type.substr(0, lp) + type.substr(rp + 1);
  }
  a.type = trim(type);
  return a;
}

}  // namespace

OpSchema OpSchema::parse(const std::string& text) {
  OpSchema s;
  size_t lp = text.find('('), arrow = text.rfind("->");
  GRAFT_CHECK(lp != std::string::npos && arrow != std::string::npos && arrow > lp,
              "op schema: cannot parse '", text, "' (expected 'name(args) -> returns')");
  std::string name = trim(text.substr(0, lp));
  if (auto dot = name.find('.'); dot != std::string::npos) {
    s.overload = name.substr(dot + 1);
    name = name.substr(0, dot);
  }
  s.name = name;
  size_t rp = text.rfind(')', arrow);
  for (auto& a : split_top(text.substr(lp + 1, rp - lp - 1))) s.args.push_back(parse_arg(a, false, text));
  std::string rets = trim(text.substr(arrow + 2));
  if (!rets.empty() && rets.front() == '(' && rets.back() == ')') rets = rets.substr(1, rets.size() - 2);
  if (rets != "()")
    for (auto& r : split_top(rets)) s.returns.push_back(parse_arg(r, true, text));
  for (size_t i = 0; i < s.args.size(); ++i)
    if (s.args[i].is_write) s.written_args.push_back(static_cast<int>(i));
  for (size_t r = 0; r < s.returns.size(); ++r) {
    if (s.returns[r].alias.empty()) continue;
    for (size_t i = 0; i < s.args.size(); ++i)
      if (s.args[i].alias == s.returns[r].alias) s.aliases.emplace_back(static_cast<int>(r), static_cast<int>(i));
  }
  return s;
}

std::string OpSchema::str() const {
  std::ostringstream os;
  os << full_name() << '(';
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    os << (i ? ", " : "") << a.type;
    if (!a.alias.empty()) os << '(' << a.alias << (a.is_write ? "!" : "") << ')';
    os << ' ' << a.name;
  }
  os << ") -> ";
  if (returns.size() != 1) os << '(';
  for (size_t i = 0; i < returns.size(); ++i) {
    os << (i ? ", " : "") << returns[i].type;
    if (!returns[i].alias.empty()) os << '(' << returns[i].alias << (returns[i].is_write ? "!" : "") << ')';
  }
  if (returns.size() != 1) os << ')';
  return os.str();
}

}  // namespace graft
